#if canImport(Glibc)
import Glibc
#endif

/// Who this process is, as the kernel knows it.
public enum CurrentProcess {
    /// The user it acts as (the effective uid): the daemon's own user, who may drive a user instance.
    public static var effectiveUserID: UInt32 { geteuid() }

    /// Ends the process with `status`, running the exit handlers (a pager's wait) as exit(3) does.
    public static func exit(_ status: Int32) -> Never {
        Glibc.exit(status)
    }
}
