#if canImport(Glibc)
import Glibc
#endif

/// The process's stdout, written with write(2): no buffer to flush at exit, and no C global (`stdout`), which
/// strict concurrency refuses.
public enum StandardOutput {
    /// Whether stdout is a terminal: a person reads it, rather than a pipe or a file.
    public static var isTerminal: Bool { isatty(1) == 1 }

    /// Writes `text` whole, again after a signal interrupts; stops at the first other failure (a reader that went
    /// away, with SIGPIPE ignored), as there is no one left to tell.
    public static func write(_ text: String) {
        text.withCString { start in
            var rest = strlen(start)
            var cursor = start
            while rest > 0 {
                let written = Glibc.write(1, cursor, rest)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                rest -= written
                cursor += written
            }
        }
    }
}
