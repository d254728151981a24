/// An instant on the wall clock (`CLOCK_REALTIME`): whole nanoseconds since 1970-01-01 00:00:00 UTC, which covers
/// the years 1678 to 2261. The wall clock can be set forward and back; the scheduler is told when it is
/// (``AlertScheduler/clockChanged(now:)``).
public struct WallTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public init(seconds: Int64) { self.nanoseconds = seconds * 1_000_000_000 }

    /// The whole seconds since the epoch, rounded down.
    public var seconds: Int64 { self.nanoseconds.floorDivided(by: 1_000_000_000) }

    public func advanced(by duration: Duration) -> WallTime { WallTime(nanoseconds: self.nanoseconds + duration.wholeNanoseconds) }
    public func duration(to other: WallTime) -> Duration { .nanoseconds(other.nanoseconds - self.nanoseconds) }
    public static func < (lhs: WallTime, rhs: WallTime) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// In UTC, ISO 8601 (`2027-03-28T01:00:00Z`, with a fraction when there is one).
    public var description: String {
        let fraction = self.nanoseconds - self.seconds * 1_000_000_000
        let civil = LocalDateTime(localSeconds: self.seconds)
        return civil.isoText + (fraction == 0 ? "" : ".\(String(fraction + 1_000_000_000).dropFirst())") + "Z"
    }
}

/// An instant on the boot-time clock (`CLOCK_BOOTTIME`): nanoseconds since the machine booted, counting time
/// asleep. It never jumps, and starts again at zero with each boot.
public struct BootTime: Sendable, Hashable, Comparable {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public func advanced(by duration: Duration) -> BootTime { BootTime(nanoseconds: self.nanoseconds + duration.wholeNanoseconds) }
    public func duration(to other: BootTime) -> Duration { .nanoseconds(other.nanoseconds - self.nanoseconds) }
    public static func < (lhs: BootTime, rhs: BootTime) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

/// Both clocks, read together: every input of the scheduler carries one.
public struct ClockReading: Sendable, Hashable {
    public var wall: WallTime
    public var boot: BootTime

    public init(wall: WallTime, boot: BootTime) {
        self.wall = wall
        self.boot = boot
    }

    /// Both clocks `duration` later, as when time passes with the wall clock left alone.
    public func advanced(by duration: Duration) -> ClockReading {
        ClockReading(wall: self.wall.advanced(by: duration), boot: self.boot.advanced(by: duration))
    }
}

extension Duration {
    /// The whole nanoseconds in this duration, rounded toward zero.
    var wholeNanoseconds: Int64 {
        let parts = self.components
        return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }
}

extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    func floorModulo(_ divisor: Int64) -> Int64 { self - self.floorDivided(by: divisor) * divisor }
}
