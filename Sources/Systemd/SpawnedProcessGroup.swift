import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A program spawned as the leader of a process group of its own, whose id is the leader's pid, and waited for until
/// none of that group is left among this process's children: the leader, and what it started, which comes back to a
/// ``Subreaper`` as its parents exit.
///
/// - Important: Nothing else in the process may reap the group's processes (`waitpid(-1, …)`, or a sweep of
///   ``Subreaper/children()`` that does not leave the group out), or ``waitForAll(timeout:recheck:)`` loses the
///   leader's status.
public struct SpawnedProcessGroup: Sendable, Hashable {
    /// The group's id, which is its leader's pid.
    public let id: Int32

    /// Spawns the leader with posix_spawn: stdin from /dev/null, stdout and stderr this process's, no other
    /// descriptor of this process's, a cleared signal mask, `SIGPIPE` at its default action, and a process group of
    /// its own.
    /// - Parameters:
    ///   - arguments: the program's path (not looked up in `PATH`), then its arguments.
    ///   - environment: all the environment the program gets.
    /// - Throws: ``SystemdError`` whose operation is the program's path, with posix_spawn's error (`ENOENT`: no such
    ///   program).
    public init(spawning arguments: [String], environment: [String: String]) throws(SystemdError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        _ = coalesced_spawn_add_closefrom(&actions, 3)
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
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw SystemdError(operation: arguments[0], errno: result) }
        self.id = pid
    }

    /// Waits until no process of the group is left among this process's children, reaping each as it ends. Past
    /// `timeout`, kills the whole group (stopped processes too) and waits for it.
    /// - Parameters:
    ///   - timeout: how long the group may run.
    ///   - recheck: how often the group is looked at again once its leader has exited while something it started
    ///     runs on: nothing signals the end of that.
    /// - Returns: the leader's wait status (`nil` when it was not reaped here), and whether the group was killed.
    public func waitForAll(timeout: Duration, recheck: Duration) -> (status: CInt?, killed: Bool) {
        let deadline = ContinuousClock.now + timeout
        // The leader's pidfd turns readable when it exits: most groups end there, with nothing left behind.
        let pidfd = pidfd_open(self.id, 0)
        defer { if pidfd >= 0 { close(pidfd) } }
        var status: CInt?
        while self.reap(status: &status) {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                // A process of the group is this process's child and not reaped yet, so the group exists and its id
                // cannot name another's.
                kill(-self.id, SIGKILL)
                while self.reap(status: &status, blocking: true) {}
                return (status, true)
            }
            if status == nil, pidfd >= 0 {
                var descriptor = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, Self.milliseconds(remaining))
            } else {
                // The leader is gone (or has no pidfd) and something it started runs on: look again soon.
                _ = poll(nil, 0, Self.milliseconds(min(remaining, recheck)))
            }
        }
        return (status, false)
    }

    /// Reaps the processes of the group that have ended, keeping the leader's wait status in `status`; `blocking`
    /// waits for one to end and returns after it. Returns whether a process of the group is still this process's
    /// child.
    private func reap(status: inout CInt?, blocking: Bool = false) -> Bool {
        while true {
            var waitStatus: CInt = 0
            let pid = waitpid(-self.id, &waitStatus, blocking ? 0 : WNOHANG)
            if pid == self.id { status = waitStatus }
            if pid > 0 {
                if blocking { return true }
                continue
            }
            if pid == 0 { return true }
            if errno == EINTR { continue }
            return false  // ECHILD: none of the group is this process's child
        }
    }

    /// Whole milliseconds for poll, rounded up so that a wait never ends short of its deadline.
    private static func milliseconds(_ duration: Duration) -> CInt {
        let (seconds, attoseconds) = duration.components
        return CInt(clamping: max(0, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
    }
}
