/// The moments iOS sends `significantTimeChange` without anyone setting the clock: a new day (local midnight) and a
/// change of the zone's offset (daylight saving time beginning or ending). Values only: the clock's follower waits
/// for the next one and tells the apps.
public struct DayBoundary: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// Local midnight: a new day began.
        case midnight
        /// The zone's offset changed (daylight saving time began or ended).
        case offsetChange
    }

    /// When it comes, in seconds since the Unix epoch.
    public var seconds: Int64
    public var kind: Kind

    public init(seconds: Int64, kind: Kind) {
        self.seconds = seconds
        self.kind = kind
    }

    /// The first boundary after `seconds` in `zone`. A midnight that does not exist (the clocks go forward at
    /// midnight) is the offset change that skips it; a midnight that comes twice (they go back to it) counts once,
    /// as the change; a change at midnight is the midnight.
    public static func next(after seconds: Int64, in zone: ZoneRules) -> DayBoundary {
        let local = zone.localTime(atSeconds: seconds)
        let today = LocalDateTime(year: local.year, month: local.month, day: local.day)
        let tomorrow = LocalDateTime(localSeconds: today.localSeconds + 86_400)
        let midnight = zone.instants(for: tomorrow).first { $0 > seconds }
        // Offsets stay within ±26 hours, so the next midnight, or the change that skips it, is within two days.
        let change = zone.transitions(from: seconds + 1, through: seconds + 2 * 86_400).first?.at
        switch (midnight, change) {
        case (let midnight?, let change?) where change < midnight: return DayBoundary(seconds: change, kind: .offsetChange)
        case (let midnight?, _): return DayBoundary(seconds: midnight, kind: .midnight)
        case (nil, let change?): return DayBoundary(seconds: change, kind: .offsetChange)
        case (nil, nil): return DayBoundary(seconds: tomorrow.localSeconds - Int64(zone.offset(at: seconds)), kind: .midnight)
        }
    }
}
