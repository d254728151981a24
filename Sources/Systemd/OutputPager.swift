#if canImport(Glibc)
import Glibc
#endif

/// A pager that this process's stdout runs into, as systemctl runs one: started before the first line is written,
/// and waited for at exit, so that the shell's prompt comes back only once the person leaves it.
public enum OutputPager {
    // Touched only from the main thread: the start and the exit handler.
    nonisolated(unsafe) private static var child: pid_t = 0

    /// Starts the first of `candidates` (each an argument vector, found on `$PATH`) that can be started, reading a
    /// pipe whose other end becomes stdout, with this environment. Whether one started: when none did, stdout is
    /// left as it is.
    @discardableResult
    public static func start(_ candidates: [[String]]) -> Bool {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        for argv in candidates {
            let arguments = argv.map { strdup($0) } + [nil]
            defer { arguments.forEach { free($0) } }
            var pid: pid_t = 0
            guard posix_spawnp(&pid, argv[0], &actions, nil, arguments, environ) == 0 else { continue }
            Self.child = pid
            dup2(fds[1], 1)
            close(fds[0])
            close(fds[1])
            atexit { OutputPager.finish() }
            return true
        }
        close(fds[0])
        close(fds[1])
        return false
    }

    /// Ends the output and waits for the person to leave the pager.
    private static func finish() {
        close(1)
        var status: Int32 = 0
        while waitpid(Self.child, &status, 0) < 0 && errno == EINTR {}
    }
}
