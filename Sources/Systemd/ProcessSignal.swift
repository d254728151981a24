#if canImport(Glibc)
import Glibc
#endif

/// The signals the daemon sends to apps' processes, by what each does to the process.
public enum ProcessSignal: Sendable, Hashable, CaseIterable {
    /// SIGKILL: ends it at once, stopped or frozen alike.
    case kill
    /// SIGTERM: asks it to end.
    case terminate
    /// SIGSTOP: holds it; it runs no code until continued.
    case stop
    /// SIGCONT: lets a stopped process run again.
    case `continue`

    /// The signal's number.
    public var number: CInt {
        switch self {
        case .kill: SIGKILL
        case .terminate: SIGTERM
        case .stop: SIGSTOP
        case .continue: SIGCONT
        }
    }
}
