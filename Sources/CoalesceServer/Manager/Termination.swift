import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// The end of a terminated app's process: SIGTERM once it acknowledged willTerminate or after the grace period,
/// then SIGKILL if it still runs a grace period later.
final class Termination: Sendable {
    let app: AppName
    let process: any AppProcess
    /// The willTerminate's sequence number.
    let sequence: UInt64
    private let grace: Duration
    private let eventLoop: any EventLoop
    let logger: Logger
    private let signalled = NIOLockedValueBox(false)

    init(app: AppName, process: any AppProcess, sequence: UInt64, grace: Duration, eventLoop: any EventLoop, logger: Logger) {
        self.app = app
        self.process = process
        self.sequence = sequence
        self.grace = grace
        self.eventLoop = eventLoop
        self.logger = logger
    }

    func start() {
        self.eventLoop.scheduleTask(in: .nanoseconds(self.grace.nanoseconds)) { self.signalTerm() }
    }

    func acknowledged() {
        self.signalTerm()
    }

    private func signalTerm() {
        let first = self.signalled.withLockedValue { signalled in
            defer { signalled = true }
            return !signalled
        }
        guard first, self.process.signal(.terminate) else { return }
        self.eventLoop.scheduleTask(in: .nanoseconds(self.grace.nanoseconds)) {
            guard self.process.isAlive, self.process.signal(.kill) else { return }
            self.logger.warning(
                "\(self.app): pid \(self.process.pid) did not exit within \(self.grace.seconds) s of SIGTERM; killed",
                metadata: ["app": "\(self.app)", "pid": "\(self.process.pid)", "message_id": "\(MessageID.killedAfterGrace)"]
            )
        }
    }
}
