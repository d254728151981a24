import CoalesceCore
import Testing

/// Where significantTimeChange comes without the clock being set: the next local midnight, or the next change of the
/// zone's offset, in real zones from the tz database.
@Suite struct DayBoundaryTests {
    // UTC seconds, from the zone's own transitions (zdump -v -c 2026,2027).
    static let berlinNoonBeforeSpring: Int64 = 1_774_699_200  // 2026-03-28 12:00 UTC, 13:00 CET
    static let berlinMidnightBeforeSpring: Int64 = 1_774_738_800  // 2026-03-28 23:00 UTC, 00:00 CET on the 29th
    static let berlinSpringForward: Int64 = 1_774_746_000  // 2026-03-29 01:00 UTC: 02:00 CET becomes 03:00 CEST
    static let berlinMidnightAfterSpring: Int64 = 1_774_821_600  // 2026-03-29 22:00 UTC, 00:00 CEST on the 30th
    static let havanaSpringForward: Int64 = 1_772_946_000  // 2026-03-08 05:00 UTC: 00:00 CST becomes 01:00 CDT
    static let havanaFallBack: Int64 = 1_793_509_200  // 2026-11-01 05:00 UTC: 01:00 CDT becomes 00:00 CST

    @Test func theNextBoundaryIsLocalMidnight() throws {
        let berlin = try ZoneFiles.rules("Europe/Berlin")
        #expect(DayBoundary.next(after: Self.berlinNoonBeforeSpring, in: berlin) == DayBoundary(seconds: Self.berlinMidnightBeforeSpring, kind: .midnight))
        #expect(DayBoundary.next(after: Self.berlinMidnightBeforeSpring - 1, in: berlin).seconds == Self.berlinMidnightBeforeSpring)
        let utc = ZoneRules.utc
        #expect(DayBoundary.next(after: 86_400 * 3 + 5, in: utc) == DayBoundary(seconds: 86_400 * 4, kind: .midnight))
        #expect(DayBoundary.next(after: 86_400 * 4, in: utc).seconds == 86_400 * 5, "strictly after")
    }

    @Test func daylightSavingTimeBeginningIsABoundaryOfItsOwn() throws {
        let berlin = try ZoneFiles.rules("Europe/Berlin")
        #expect(DayBoundary.next(after: Self.berlinMidnightBeforeSpring, in: berlin) == DayBoundary(seconds: Self.berlinSpringForward, kind: .offsetChange))
        // After it, the next midnight is 22:00 UTC: the day had 23 hours.
        #expect(DayBoundary.next(after: Self.berlinSpringForward, in: berlin) == DayBoundary(seconds: Self.berlinMidnightAfterSpring, kind: .midnight))
    }

    /// Havana's clocks go forward at midnight: that day has no 00:00, and its boundary is the change.
    @Test func aMidnightThatDoesNotExistIsTheChangeThatSkipsIt() throws {
        let havana = try ZoneFiles.rules("America/Havana")
        #expect(DayBoundary.next(after: Self.havanaSpringForward - 3_600, in: havana) == DayBoundary(seconds: Self.havanaSpringForward, kind: .offsetChange))
        // …and back to midnight in November: the first 00:00 is the new day, the change an hour later its own.
        let firstMidnight = Self.havanaFallBack - 3_600
        #expect(DayBoundary.next(after: firstMidnight - 60, in: havana) == DayBoundary(seconds: firstMidnight, kind: .midnight))
        #expect(DayBoundary.next(after: firstMidnight, in: havana) == DayBoundary(seconds: Self.havanaFallBack, kind: .offsetChange))
    }
}
