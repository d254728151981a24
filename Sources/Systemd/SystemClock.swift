import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's clocks, read with clock_gettime(2). A reading allocates nothing: the manager reads the wall clock on
/// every transition and every post.
public enum SystemClock: Sendable {
    /// Wall time, seconds since the Unix epoch: it jumps when someone sets the clock.
    case realtime
    /// Time since boot, counting suspended time.
    case boottime
    /// Time since boot, not counting suspended time; never set.
    case monotonic

    /// A reading: whole seconds and the nanoseconds past them, as the kernel gives it.
    public struct Reading: Sendable, Hashable {
        public var seconds: Int64
        public var nanoseconds: Int64

        @inlinable
        public init(seconds: Int64, nanoseconds: Int64) {
            self.seconds = seconds
            self.nanoseconds = nanoseconds
        }

        /// The reading in nanoseconds.
        @inlinable
        public var totalNanoseconds: Int64 { self.seconds * 1_000_000_000 + self.nanoseconds }

        /// The reading in seconds, with its fraction.
        @inlinable
        public var totalSeconds: Double { Double(self.seconds) + Double(self.nanoseconds) / 1e9 }
    }

    var id: clockid_t {
        switch self {
        case .realtime: CLOCK_REALTIME
        case .boottime: CLOCK_BOOTTIME
        case .monotonic: CLOCK_MONOTONIC
        }
    }

    /// The clock now.
    /// - Throws: ``SystemdError`` from `clock_gettime` (its operation names the clock's number, as
    ///   `clock_gettime(7)`), only for a clock the kernel does not have: all three are in every kernel since 2.6.39.
    public func read() throws(SystemdError) -> Reading {
        var time = timespec()
        guard clock_gettime(self.id, &time) == 0 else {
            throw SystemdError(operation: "clock_gettime(\(self.id))", errno: errno)
        }
        return Reading(seconds: Int64(time.tv_sec), nanoseconds: Int64(time.tv_nsec))
    }

    /// The clock now; zero in the case ``read()`` throws for, which no kernel the daemon runs on has.
    public func now() -> Reading {
        var time = timespec()
        _ = clock_gettime(self.id, &time)
        return Reading(seconds: Int64(time.tv_sec), nanoseconds: Int64(time.tv_nsec))
    }
}
