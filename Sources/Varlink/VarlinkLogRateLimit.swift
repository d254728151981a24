public import NIOCore

/// Rate limiting of one kind of log entry, as journald limits a noisy source: the first ``burst`` entries of an
/// interval are logged, the rest only counted, and the count is logged in one entry once the interval has ended.
///
/// It reads the time it is given and never sleeps: the caller logs, and schedules the count's entry at the deadline
/// ``Decision/suppressFirst(reportAt:)`` names.
public struct VarlinkLogRateLimit: Sendable {
    /// What to do with one entry.
    public enum Decision: Sendable, Hashable {
        /// Log it.
        case log
        /// Leave it out; it is the first left out since the last count was taken: take the count
        /// (``takeSuppressed()``) at `reportAt` and log it.
        case suppressFirst(reportAt: NIODeadline)
        /// Leave it out; a count is due already.
        case suppress
    }

    public let interval: TimeAmount
    public let burst: Int
    /// When the current interval ends; `nil` before the first entry.
    private var intervalEnd: NIODeadline?
    /// Entries logged in the current interval.
    private var logged = 0
    /// Entries left out and not yet counted in a logged entry.
    private var suppressed = 0

    public init(interval: TimeAmount, burst: Int) {
        self.interval = interval
        self.burst = burst
    }

    /// An entry is due at `now`.
    public mutating func entry(now: NIODeadline) -> Decision {
        if self.intervalEnd.map({ now >= $0 }) ?? true {
            self.intervalEnd = now + self.interval
            self.logged = 0
        }
        if self.logged < self.burst {
            self.logged += 1
            return .log
        }
        self.suppressed += 1
        // intervalEnd was set above.
        return self.suppressed == 1 ? .suppressFirst(reportAt: self.intervalEnd!) : .suppress
    }

    /// The entries left out since the last count, which starts again at zero.
    public mutating func takeSuppressed() -> Int {
        defer { self.suppressed = 0 }
        return self.suppressed
    }
}
