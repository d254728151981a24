import NIOConcurrencyHelpers
import Synchronization
import Varlink

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

    /// The connections the file descriptor limit leaves room for (``connectionBudget(descriptorLimit:)``): what
    /// bounds MaxConnections= when it does not fit.
    let connectionBudget: Int

    init(configuration: Configuration, connectionBudget: Int = .max) {
        self.connectionBudget = connectionBudget
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

    /// The server's limits under the configuration in force.
    var serverLimits: VarlinkServerLimits { Daemon.limits(self.configuration, connectionBudget: self.connectionBudget) }

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
