import CoalesceCore
import Testing

/// What components mean when some are left out, what is refused, and the search on days that do not exist.
@Suite struct CalendarComponentsTests {
    @Test func componentsBelowTheSmallestGivenAreZeroAndAboveItAny() {
        #expect(CalendarComponents(hour: 8, minute: 30).description == "*-*-* 08:30:00")
        #expect(CalendarComponents(minute: 15).description == "*-*-* *:15:00")
        #expect(CalendarComponents(weekday: 2).description == "Mon *-*-* 00:00:00")
        #expect(CalendarComponents(year: 2030).description == "2030-01-01 00:00:00")
        #expect(CalendarComponents(day: 1, minute: 30).description == "*-*-01 *:30:00")
        #expect(CalendarComponents(second: 5).description == "*-*-* *:*:05")
    }

    @Test func weekdaysCountFromSunday() {
        // 2026-11-29 is a Sunday.
        #expect(wall("2026-11-29 00:00:00").weekday == 1)
        let monday = CalendarComponents(weekday: 2, hour: 8, minute: 30)
        #expect(monday.next(after: utc("2026-11-26 12:00:00"), in: .utc) == utc("2026-11-30 08:30:00"))
    }

    @Test func theNextDateIsStrictlyAfterTheBase() {
        let daily = CalendarComponents(hour: 8)
        #expect(daily.next(after: utc("2026-11-26 08:00:00"), in: .utc) == utc("2026-11-27 08:00:00"))
        #expect(daily.next(after: utc("2026-11-26 07:59:59"), in: .utc) == utc("2026-11-26 08:00:00"))
        let justBefore = utc("2026-11-26 08:00:00").advanced(by: .milliseconds(-1))
        #expect(daily.next(after: justBefore, in: .utc) == utc("2026-11-26 08:00:00"))
    }

    @Test func theThirtyFirstAndTwentyNinthOfFebruaryAreSkippedNotMoved() {
        let thirtyFirst = CalendarComponents(day: 31, hour: 9)
        var dates: [WallTime] = []
        var base = utc("2027-01-31 10:00:00")
        for _ in 0..<3 {
            base = thirtyFirst.next(after: base, in: .utc)!
            dates.append(base)
        }
        #expect(dates == [utc("2027-03-31 09:00:00"), utc("2027-05-31 09:00:00"), utc("2027-07-31 09:00:00")])
        let leapDay = CalendarComponents(month: 2, day: 29, hour: 9)
        #expect(leapDay.next(after: utc("2027-02-01 00:00:00"), in: .utc) == utc("2028-02-29 09:00:00"))
        #expect(leapDay.next(after: utc("2096-03-01 00:00:00"), in: .utc) == utc("2104-02-29 09:00:00"))
        #expect(CalendarComponents(month: 2, day: 30).next(after: utc("2026-01-01 00:00:00"), in: .utc) == nil)
    }

    @Test func aRuleOfAYearGoneNeverComes() {
        #expect(CalendarComponents(year: 2025, month: 6).next(after: utc("2026-01-01 00:00:00"), in: .utc) == nil)
        #expect(CalendarComponents(year: 2199, month: 12, day: 31).next(after: utc("2026-01-01 00:00:00"), in: .utc) == utc("2199-12-31 00:00:00"))
    }

    @Test func outOfRangeAndEmptyComponentsAreRefused() {
        #expect(throws: AlertError.noComponents) { try CalendarComponents().validate() }
        #expect(throws: AlertError.componentOutOfRange(name: "month", value: 13, range: 1...12)) {
            try CalendarComponents(month: 13).validate()
        }
        #expect(throws: AlertError.componentOutOfRange(name: "weekday", value: 0, range: 1...7)) {
            try CalendarComponents(weekday: 0).validate()
        }
        #expect(throws: AlertError.componentOutOfRange(name: "second", value: 60, range: 0...59)) {
            try CalendarComponents(second: 60).validate()
        }
    }
}
