@testable import CoalesceStore
import CoalesceTestSupport
import Logging
import Synchronization

/// The store in `directory`, once the last start's has let its lock go: the lock goes with the last reference to
/// that store, which a thread of the last start (a timer's, the writer's) may hold a moment after it closed.
func openStore(_ directory: TemporaryDirectory) async throws -> Store {
    let deadline = ContinuousClock.now + .seconds(20)
    while true {
        do {
            // Opening syncs the store's record: on a thread of its own, not one of the concurrency pool's few.
            return try await onThread { try Store(stateDirectory: directory.path) }
        } catch {
            guard case .inUse? = error as? StoreError, ContinuousClock.now < deadline else { throw error }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Log entries kept in memory, for a test to look at.
final class LogCapture: LogHandler, @unchecked Sendable {
    struct Entry {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let stored = Mutex<[Entry]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var entries: [Entry] { self.stored.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let metadata = (event.metadata ?? [:]).mapValues { "\($0)" }
        self.stored.withLock { $0.append(Entry(level: event.level, message: "\(event.message)", metadata: metadata)) }
    }
}
