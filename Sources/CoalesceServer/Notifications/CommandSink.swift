import CSystemd
import Foundation
import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

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
        var groups: Set<pid_t> = []
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
        let group: pid_t
        do {
            group = try self.start(["/bin/sh", "-c", run.command], environment: environment)
        } catch {
            self.logger.error("Cannot run the notification command: \(error)", metadata: ["command": "\(run.command)"])
            return
        }
        let (status, killed) = Self.wait(forGroup: group, timeout: run.timeout)
        self.finish(group)
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
    private func start(_ arguments: [String], environment: [String: String]) throws(SpawnError) -> pid_t {
        try self.state.withLock { state throws(SpawnError) -> pid_t in
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
            let pid = try Self.spawn(arguments, environment: environment)
            state.groups.insert(pid)
            return pid
        }
    }

    /// Waits until no process of `group` is left among the daemon's children: the shell that leads it, and what
    /// it started, which comes back to the daemon as its parents exit. Past `timeout`, kills the whole group
    /// (stopped processes too) and waits for it. Returns the shell's wait status and whether the group was killed.
    private static func wait(forGroup group: pid_t, timeout: Duration) -> (status: CInt?, killed: Bool) {
        let deadline = ContinuousClock.now + timeout
        // The shell's pidfd turns readable when it exits: most commands end there, with nothing left behind.
        let pidfd = pidfd_open(group, 0)
        defer { if pidfd >= 0 { close(pidfd) } }
        var status: CInt?
        while Self.reap(group, status: &status) {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                // A process of the group is the daemon's child and not reaped yet, so the group exists and its id
                // cannot name another's.
                kill(-group, SIGKILL)
                while Self.reap(group, status: &status, blocking: true) {}
                return (status, true)
            }
            if status == nil, pidfd >= 0 {
                var descriptor = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, Self.milliseconds(remaining))
            } else {
                // The shell is gone and something it started runs on: nothing signals its end, so look again soon.
                _ = poll(nil, 0, Self.milliseconds(min(remaining, Self.leftoverPoll)))
            }
        }
        return (status, false)
    }

    /// Reaps the processes of `group` that have ended, keeping the leader's wait status in `status`; `blocking`
    /// waits for one to end and returns after it. Returns whether a process of the group is still the daemon's
    /// child.
    private static func reap(_ group: pid_t, status: inout CInt?, blocking: Bool = false) -> Bool {
        while true {
            var waitStatus: CInt = 0
            let pid = waitpid(-group, &waitStatus, blocking ? 0 : WNOHANG)
            if pid == group { status = waitStatus }
            if pid > 0 {
                if blocking { return true }
                continue
            }
            if pid == 0 { return true }
            if errno == EINTR { continue }
            return false  // ECHILD: none of the group is the daemon's child
        }
    }

    /// Whole milliseconds for poll, rounded up so that a wait never ends short of its deadline.
    private static func milliseconds(_ duration: Duration) -> CInt {
        let (seconds, attoseconds) = duration.components
        return CInt(clamping: max(0, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
    }

    /// Lets `group` go, then reaps what the daemon's children hold of groups no longer running: processes that
    /// left their command's group, which came back to the daemon when their parents exited. The daemon has no
    /// other children.
    private func finish(_ group: pid_t) {
        let children = Subreaper.children()
        self.state.withLock { state in
            state.groups.remove(group)
            for child in children {
                let childGroup = getpgid(child)
                guard childGroup > 0, !state.groups.contains(childGroup) else { continue }
                var status: CInt = 0
                _ = waitpid(child, &status, WNOHANG)
            }
        }
    }

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    /// posix_spawn with stdin from /dev/null, no descriptor of the daemon's but stdout and stderr, a cleared signal
    /// mask, and a process group of its own (whose id is the new process's pid).
    private static func spawn(_ arguments: [String], environment: [String: String]) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        _ = closeFromAction(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(description: "\(arguments[0]): \(String(cString: strerror(result)))") }
        return pid
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not export.
private let closeFromAction: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
        return { _, _ in 0 }
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
}()
