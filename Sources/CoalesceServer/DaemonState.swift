import NIOConcurrencyHelpers
import Synchronization

/// What the daemon knows about itself: when it started, the configuration in force, and its reloads.
final class DaemonState: Sendable {
    struct Snapshot: Sendable {
        var configuration: Configuration
        var uptime: Duration
        var reloads: Int
        var failedReloads: Int
    }

    private struct Stored {
        var configuration: Configuration
        var reloads = 0
        var failedReloads = 0
    }

    private let started = ContinuousClock.now
    private let stored: NIOLockedValueBox<Stored>
    /// The configuration's bound on a payload, read by every post: without the lock, and without copying the
    /// whole configuration to read one number.
    private let payloadLimit: Synchronization.Atomic<Int>

    init(configuration: Configuration) {
        self.stored = NIOLockedValueBox(Stored(configuration: configuration))
        self.payloadLimit = Synchronization.Atomic(configuration.maxPayloadSize)
    }

    /// ``Configuration/maxPayloadSize`` of the configuration in force.
    var maxPayloadSize: Int { self.payloadLimit.load(ordering: .relaxed) }

    var snapshot: Snapshot {
        let uptime = ContinuousClock.now - self.started
        return self.stored.withLockedValue {
            Snapshot(configuration: $0.configuration, uptime: uptime, reloads: $0.reloads, failedReloads: $0.failedReloads)
        }
    }

    var configuration: Configuration { self.stored.withLockedValue { $0.configuration } }

    func reloaded(_ configuration: Configuration) {
        self.stored.withLockedValue {
            $0.configuration = configuration
            $0.reloads += 1
            self.payloadLimit.store(configuration.maxPayloadSize, ordering: .relaxed)
        }
    }

    func reloadFailed() {
        self.stored.withLockedValue { $0.failedReloads += 1 }
    }
}
