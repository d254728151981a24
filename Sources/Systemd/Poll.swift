#if canImport(Glibc)
import Glibc
#endif

/// poll(2) over a few descriptors, for a thread of its own that waits on several at once (timers, a wakeup, a
/// trigger) and never spins.
public enum Poll {
    /// What to wait for on a descriptor, and what poll found on it.
    public struct Events: OptionSet, Sendable, Hashable {
        public let rawValue: Int16

        public init(rawValue: Int16) {
            self.rawValue = rawValue
        }

        /// There is data to read (`POLLIN`).
        public static let readable = Events(rawValue: Int16(POLLIN))
        /// An exceptional condition (`POLLPRI`): for a PSI trigger, the stall passed its threshold.
        public static let priority = Events(rawValue: Int16(POLLPRI))
        /// Reported whether asked for or not (`POLLERR`): for a PSI trigger, its file is gone.
        public static let error = Events(rawValue: Int16(POLLERR))
        /// Reported whether asked for or not (`POLLHUP`).
        public static let hangUp = Events(rawValue: Int16(POLLHUP))
        /// Reported whether asked for or not (`POLLNVAL`): the descriptor is not open.
        public static let invalid = Events(rawValue: Int16(POLLNVAL))
    }

    /// Waits until one of `descriptors` reports an event, or `timeout` passes.
    /// - Parameters:
    ///   - descriptors: each descriptor with the events it is waited for; a negative descriptor is passed over and
    ///     reports none, so that a descriptor not made yet keeps its place.
    ///   - timeout: `nil` waits without end. Rounded up to whole milliseconds, so that it has passed when the wait
    ///     ends for it; zero or less does not wait.
    /// - Returns: what each descriptor reported, in the order given; all empty when the timeout passed.
    /// - Throws: ``SystemdError`` from `poll`: `EINTR` when a signal interrupted the wait, which the caller waits
    ///   again after (it knows the deadline; this call does not), `ENOMEM`.
    public static func wait(
        _ descriptors: [(descriptor: CInt, events: Events)], timeout: Duration?
    ) throws(SystemdError) -> [Events] {
        var entries = descriptors.map { pollfd(fd: $0.descriptor, events: $0.events.rawValue, revents: 0) }
        let ready = poll(&entries, nfds_t(entries.count), timeout.map(Self.milliseconds) ?? -1)
        guard ready >= 0 else { throw SystemdError(operation: "poll", errno: errno) }
        return entries.map { Events(rawValue: $0.revents) }
    }

    /// poll's timeout for `duration`: whole milliseconds, rounded up from whole nanoseconds; 0 for none left, and
    /// at most `Int32.max` (24 days), as poll takes no more.
    static func milliseconds(_ duration: Duration) -> Int32 {
        guard duration > .zero else { return 0 }
        let (seconds, attoseconds) = duration.components
        // Seconds past Int32.max milliseconds clamp anyway; capping them first keeps the sum from overflowing.
        let whole = min(seconds, Int64(Int32.max)) * 1000
        return Int32(clamping: whole + (attoseconds / 1_000_000_000 + 999_999) / 1_000_000)
    }
}
