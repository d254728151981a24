import CoalesceCore
import CoalesceStore
import Logging
import Synchronization

/// The daemon's one ``WriteRefusal``: every writer reports the store's answers here, and the journal hears once when
/// the store starts refusing a writer's writes and once when it keeps one again. A leaf lock: taken under the
/// manager's, it takes none, and ``answered(_:_:)`` writes nothing to the journal, so that a writer holding its own
/// lock can log once it lets go (``entry(_:metadata:)``).
final class StoreWrites: Sendable {
    private let refusal: Mutex<WriteRefusal>
    private let logger: Logger

    init(failing: Bool, logger: Logger) {
        self.refusal = Mutex(WriteRefusal(failing: failing))
        self.logger = logger
    }

    /// The store answered a write of `what` (events, notifications, a registration): kept, or refused with `error`.
    /// Returns what the journal is to be told.
    func answered(_ what: String, _ error: (any Error)?) -> WriteRefusal.Notice? {
        self.refusal.withLock { $0.answered(what, refusal: error.map { "\($0)" }) }
    }

    /// ``answered(_:_:)``, told to the journal at once: for a writer that holds no lock.
    func report(_ what: String, _ error: (any Error)?) {
        guard let notice = self.answered(what, error) else { return }
        let (level, message, metadata) = Self.entry(notice, metadata: [:])
        self.logger.log(level: level, "\(message)", metadata: metadata)
    }

    /// ``report(_:_:)`` of a write's result.
    func report(_ what: String, _ result: Result<Void, StoreError>) {
        switch result {
        case .success: self.report(what, nil)
        case .failure(let error): self.report(what, error)
        }
    }

    static func entry(_ notice: WriteRefusal.Notice, metadata: Logger.Metadata) -> (Logger.Level, String, Logger.Metadata) {
        switch notice {
        case .failing(let what, let reason):
            (.error, "Cannot write \(what) to the store: \(reason)", metadata.merging(["reason": "\(reason)"]) { $1 })
        case .writingAgain(let what):
            (.notice, "Writing \(what) to the store again", metadata)
        }
    }
}
