import Foundation
import Logging
import Synchronization
import Systemd

/// `[Notifications] Command=`: a command run for each presentation, through `/bin/sh -c`, with the notification's
/// fields in its environment. At most `MaxCommands=` run at once; the others wait their turn, up to a bound past
/// which they are dropped and logged (the journal has every presentation regardless). One that runs longer than
/// `CommandTimeoutSec=` is killed, and logged.
///
/// A command is a process group of its own, led by its shell: all it starts is killed with it at the timeout, and
/// it holds its place among the `MaxCommands=` until none of its group is left, so that a command whose shell exits
/// at once and leaves a process in the background still runs no longer than the timeout, and the next one waits
/// for it. The daemon is a child subreaper: what a command leaves behind comes back to it when its parent exits,
/// rather than to init, to be waited for, killed and reaped. A process that leaves its command's group (`setsid`)
/// is no longer bounded; it is reaped when a later command ends.
final class CommandSink: Sendable {
    struct Run: Sendable {
        var command: String
        var environment: [String: String]
        var timeout: Duration
    }

    private struct State {
        var running = 0
        var waiting: [Run] = []
        /// The process groups of the commands running now, each named by its leader's pid: a sweep leaves their
        /// processes to the thread that runs the command.
        var groups: Set<Int32> = []
        /// Whether the daemon has tried to become a subreaper (once, before its first command).
        var subreaperTried = false
    }

    /// Presentations waiting for a command past this are dropped, and logged.
    static let waitingBound = 1024

    /// How often a command whose shell has exited is looked at again, while something it started runs on.
    static let leftoverPoll: Duration = .milliseconds(50)

    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Runs `run` now, or once a running command ends when `limit` already run.
    func submit(_ run: Run, limit: Int) {
        enum Outcome { case start, waits, dropped }
        let outcome = self.state.withLock { state -> Outcome in
            if state.running < limit {
                state.running += 1
                return .start
            }
            guard state.waiting.count < Self.waitingBound else { return .dropped }
            state.waiting.append(run)
            return .waits
        }
        switch outcome {
        case .start: Thread.detachNewThread { self.runAll(first: run) }
        case .waits: break
        case .dropped:
            self.logger.warning(
                "Notification command not run: \(Self.waitingBound) presentations already wait for one",
                metadata: ["app": "\(run.environment["COALESCED_APP"] ?? "")", "notification": "\(run.environment["COALESCED_NOTIFICATION"] ?? "")"]
            )
        }
    }

    /// Runs `first`, then whatever waits, on this thread, until nothing does.
    private func runAll(first: Run) {
        var next: Run? = first
        while let run = next {
            self.execute(run)
            next = self.state.withLock { state in
                if state.waiting.isEmpty {
                    state.running -= 1
                    return nil
                }
                return state.waiting.removeFirst()
            }
        }
    }

    /// Spawns the command and waits until all of it is gone, killing its group at its timeout.
    private func execute(_ run: Run) {
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in run.environment { environment[key] = value }
        let group: SpawnedProcessGroup
        do {
            group = try self.start(["/bin/sh", "-c", run.command], environment: environment)
        } catch {
            self.logger.error("Cannot run the notification command: \(error)", metadata: ["command": "\(run.command)"])
            return
        }
        // The shell and all it started, the group killed at the timeout.
        let (status, killed) = group.waitForAll(timeout: run.timeout, recheck: Self.leftoverPoll)
        self.finish(group.id)
        if killed {
            self.logger.warning(
                "Notification command killed after \(run.timeout)", metadata: ["command": "\(run.command)", "timeout": "\(run.timeout)"]
            )
        } else if let status, status != 0 {
            let exited = status & 0x7f == 0
            let code = (status >> 8) & 0xff
            self.logger.warning(
                "Notification command failed",
                metadata: ["command": "\(run.command)", "status": "\(exited ? "exit \(code)" : "signal \(status & 0x7f)")"]
            )
        }
    }

    /// Spawns the command as the leader of a process group of its own, and counts the group as running. Under the
    /// lock, so that no sweep sees the new leader before its group is known.
    private func start(
        _ arguments: [String], environment: [String: String]
    ) throws(SystemdError) -> SpawnedProcessGroup {
        try self.state.withLock { state throws(SystemdError) -> SpawnedProcessGroup in
            if !state.subreaperTried {
                state.subreaperTried = true
                do {
                    try Subreaper.become()
                } catch {
                    self.logger.warning(
                        "Cannot become a subreaper: \(error); what a notification command leaves running in the background is not bounded by its timeout, ignoring"
                    )
                }
            }
            let group = try SpawnedProcessGroup(spawning: arguments, environment: environment)
            state.groups.insert(group.id)
            return group
        }
    }

    /// Lets `group` go, then reaps what the daemon's children hold of groups no longer running: processes that
    /// left their command's group, which came back to the daemon when their parents exited. The daemon has no
    /// other children.
    private func finish(_ group: Int32) {
        let children = Subreaper.children()
        self.state.withLock { state in
            state.groups.remove(group)
            Subreaper.reapEnded(children) { !state.groups.contains($0) }
        }
    }
}
