#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM and SIGINT as a descriptor that becomes readable, for a program whose loop waits in `poll`: the handler
/// writes a byte to a pipe (all a signal handler may safely do), and the loop watches the pipe's other end.
public enum StopSignals {
    nonisolated(unsafe) private static var writeEnd: CInt = -1

    /// Installs the handlers, once per process, and returns the pipe's read end (close-on-exec, non-blocking),
    /// which stays open for the life of the process.
    /// - Throws: ``SystemdError`` from `pipe` (`EMFILE`); the handlers are not installed then.
    public static func watch() throws(SystemdError) -> CInt {
        var ends: [CInt] = [0, 0]
        guard pipe(&ends) == 0 else { throw SystemdError(operation: "pipe", errno: errno) }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        self.writeEnd = ends[1]
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            var byte: UInt8 = 1
            _ = write(StopSignals.writeEnd, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        for signal in [SIGTERM, SIGINT] { sigaction(signal, &action, nil) }
        return ends[0]
    }

    /// Ignores SIGPIPE, so that a write to a peer that went away fails with `EPIPE` instead of ending the process.
    public static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }
}
