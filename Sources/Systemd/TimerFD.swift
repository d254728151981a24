import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A timerfd (timerfd_create(2)): a descriptor that turns readable when its clock reaches the instant it is armed
/// at, for a thread that waits in poll beside other descriptors. Close-on-exec; closed at ``close()`` or with the
/// last reference, whichever comes first.
public final class TimerFD: Sendable {
    /// The clock a timer follows.
    public enum Clock: Sendable, Hashable {
        /// `CLOCK_REALTIME`: the wall clock, which may be set (see ``TimerFD/arm(at:cancelOnSet:)``).
        case realtime
        /// `CLOCK_BOOTTIME`: time since boot, the time suspended included.
        case boottime

        var id: clockid_t {
            switch self {
            case .realtime: CLOCK_REALTIME
            case .boottime: CLOCK_BOOTTIME
            }
        }

        /// The C name, for errors.
        var name: String {
            switch self {
            case .realtime: "CLOCK_REALTIME"
            case .boottime: "CLOCK_BOOTTIME"
            }
        }
    }

    /// The clock the timer follows.
    public let clock: Clock
    private let owned: OwnedDescriptor

    /// The timerfd, for poll; -1 once closed.
    public var descriptor: CInt { self.owned.descriptor }

    /// Creates a timer, disarmed.
    /// - Parameters:
    ///   - clock: the clock it follows.
    ///   - nonBlocking: whether ``readExpirations()`` fails with `EAGAIN`, rather than waits, when the timer has not
    ///     expired.
    /// - Throws: ``SystemdError`` from `timerfd_create` (the process's descriptors used up, say).
    public init(clock: Clock, nonBlocking: Bool = true) throws(SystemdError) {
        let flags = Int32(TFD_CLOEXEC) | (nonBlocking ? Int32(TFD_NONBLOCK) : 0)
        let descriptor = timerfd_create(clock.id, flags)
        guard descriptor >= 0 else { throw SystemdError(operation: "timerfd_create(\(clock.name))", errno: errno) }
        self.clock = clock
        self.owned = OwnedDescriptor(descriptor)
    }

    /// Arms the timer at an absolute instant on its clock, replacing what it was armed at; `nil` disarms it. The
    /// timer expires once, with no interval.
    /// - Parameters:
    ///   - instant: the time since the clock's origin (the epoch for ``Clock/realtime``, the boot for
    ///     ``Clock/boottime``). An instant at or before the origin is long past: it expires at once.
    ///   - cancelOnSet: for ``Clock/realtime``, `TFD_TIMER_CANCEL_ON_SET`: once anyone sets the clock,
    ///     ``readExpirations()`` fails with `ECANCELED` until the timer is armed again.
    /// - Throws: ``SystemdError`` from `timerfd_settime`; with `cancelOnSet`, `ECANCELED` when the clock was set
    ///   since the last read: the timer is armed regardless (timerfd_create(2), NOTES), and that mark is cleared.
    public func arm(at instant: Duration?, cancelOnSet: Bool = false) throws(SystemdError) {
        var value = itimerspec()
        if let instant {
            // An it_value of zero disarms, and a negative one is refused: one nanosecond after the origin, which
            // expires at once, stands for every instant at or before it.
            let (seconds, attoseconds) = (instant > .zero ? instant : .nanoseconds(1)).components
            value.it_value = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        }
        let flags = Int32(TFD_TIMER_ABSTIME) | (cancelOnSet ? Int32(TFD_TIMER_CANCEL_ON_SET) : 0)
        guard timerfd_settime(self.descriptor, flags, &value, nil) == 0 else {
            throw SystemdError(operation: "timerfd_settime(\(self.clock.name))", errno: errno)
        }
    }

    /// Whether the timer is armed: `false` once it expired, or was disarmed.
    /// - Throws: ``SystemdError`` from `timerfd_gettime` (`EBADF` once closed).
    public func isArmed() throws(SystemdError) -> Bool {
        var current = itimerspec()
        guard timerfd_gettime(self.descriptor, &current) == 0 else {
            throw SystemdError(operation: "timerfd_gettime(\(self.clock.name))", errno: errno)
        }
        return current.it_value.tv_sec != 0 || current.it_value.tv_nsec != 0
    }

    /// Reads how many times the timer expired since the last read, which makes it unreadable again; a read a
    /// signal interrupts is made again.
    /// - Throws: ``SystemdError`` from `read`: `EAGAIN` when it has not expired since (a non-blocking timer);
    ///   `ECANCELED` when the clock was set (armed with `cancelOnSet`).
    @discardableResult
    public func readExpirations() throws(SystemdError) -> UInt64 {
        var count: UInt64 = 0
        while true {
            if read(self.descriptor, &count, MemoryLayout<UInt64>.size) == MemoryLayout<UInt64>.size { return count }
            if errno != EINTR { throw SystemdError(operation: "read(timerfd \(self.clock.name))", errno: errno) }
        }
    }

    /// Closes the timerfd now, rather than with the last reference. Later calls do nothing, and the others then fail
    /// with `EBADF`.
    public func close() {
        self.owned.close()
    }
}
