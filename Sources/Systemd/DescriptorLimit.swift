#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open descriptors (RLIMIT_NOFILE), which bounds the connections the daemon can hold.
public enum DescriptorLimit {
    /// Lifts the soft limit (often 1,024) to the hard limit, as systemd's own daemons do, and returns the soft
    /// limit in force: the old one when it cannot be lifted, `Int.max` when it cannot be read or is unlimited.
    public static func raiseToHardLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            let raised = rlimit(rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max)
            // The old limit stays if this fails, and is what is returned.
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), [raised]) == 0 { limit = raised }
        }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }

    /// The soft and hard limits now; `nil` when they cannot be read.
    public static func current() -> (soft: Int, hard: Int)? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        func clamped(_ value: rlim_t) -> Int { value > rlim_t(Int.max) ? Int.max : Int(value) }
        return (clamped(limit.rlim_cur), clamped(limit.rlim_max))
    }
}
