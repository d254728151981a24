import CoalesceCore
import Testing

/// One rule of the table: its systemd spelling, its components, the zone, the base instant (UTC) and the next
/// instants (UTC) systemd gives.
struct OracleRow: Sendable, CustomStringConvertible {
    var spec: String
    var components: CalendarComponents
    var zone: String
    var base: String
    var expected: [String]

    init(_ spec: String, _ components: CalendarComponents, _ zone: String, base: String, _ expected: [String]) {
        self.spec = spec
        self.components = components
        self.zone = zone
        self.base = base
        self.expected = expected
    }

    var description: String { "'\(self.spec) \(self.zone)' after \(self.base) UTC" }
}

/// Calendar rules around the DST transitions of 2026–2028 in four zones that shift differently (Berlin: an hour;
/// Dublin: negative DST in its file; Santiago: at midnight; Lord Howe: half an hour), the 31st and 29 February,
/// each against `systemd-analyze calendar`, systemd 252 (Debian 12).
///
/// Each row's answers came from
/// `TZ=UTC systemd-analyze calendar --iterations=N --base-time='BASE UTC' 'SPEC ZONE'`, copied here as printed.
///
/// On the repeated hour our search follows systemd: each wall time fires once, at its first occurrence, so a rule
/// of every minute fires nothing in the second pass through the hour (systemd issue #8647 reports this as a bug;
/// we keep it, since the issue asks for systemd's answers and a wall time firing once is what a calendar rule
/// means for a daily or hourly rule too).
@Suite struct CalendarOracleTests {
    static let rows: [OracleRow] = [
        // spring forward: 02:30 does not exist on the 29th, skipped
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2026-03-28 12:00:00",
                  ["2026-03-30 00:30:00", "2026-03-31 00:30:00", "2026-04-01 00:30:00"]),
        // fall back: 02:30 fires once, at its first occurrence (CEST)
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2026-10-24 12:00:00",
                  ["2026-10-25 00:30:00", "2026-10-26 01:30:00", "2026-10-27 01:30:00"]),
        // base in the first pass, after 02:30 CEST: not again at 02:30 CET
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2026-10-25 00:40:00",
                  ["2026-10-26 01:30:00", "2026-10-27 01:30:00"]),
        // base in the second pass (02:10 CET): 02:30 CET is the next
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2026-10-25 01:10:00",
                  ["2026-10-25 01:30:00", "2026-10-26 01:30:00"]),
        // hourly at :30 across the gap
        OracleRow("*-*-* *:30:00", CalendarComponents(minute: 30), "Europe/Berlin", base: "2026-03-28 23:00:00",
                  ["2026-03-28 23:30:00", "2026-03-29 00:30:00", "2026-03-29 01:30:00", "2026-03-29 02:30:00"]),
        // hourly at :30 across the repeated hour: 02:30 once
        OracleRow("*-*-* *:30:00", CalendarComponents(minute: 30), "Europe/Berlin", base: "2026-10-24 23:00:00",
                  ["2026-10-24 23:30:00", "2026-10-25 00:30:00", "2026-10-25 02:30:00", "2026-10-25 03:30:00", "2026-10-25 04:30:00"]),
        // every minute across the gap
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Europe/Berlin", base: "2026-03-29 00:58:30",
                  ["2026-03-29 00:59:00", "2026-03-29 01:00:00", "2026-03-29 01:01:00"]),
        // every minute: the second pass of the repeated hour fires nothing (systemd #8647)
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Europe/Berlin", base: "2026-10-25 00:58:30",
                  ["2026-10-25 00:59:00", "2026-10-25 02:00:00", "2026-10-25 02:01:00"]),
        // every minute, base in the second pass
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Europe/Berlin", base: "2026-10-25 01:30:30",
                  ["2026-10-25 01:31:00", "2026-10-25 01:32:00"]),
        // Sundays 02:30: the spring-forward Sunday is skipped
        OracleRow("Sun *-*-* 02:30:00", CalendarComponents(weekday: 1, hour: 2, minute: 30), "Europe/Berlin", base: "2026-03-25 12:00:00",
                  ["2026-04-05 00:30:00", "2026-04-12 00:30:00", "2026-04-19 00:30:00"]),
        // Sundays 02:30 across fall back
        OracleRow("Sun *-*-* 02:30:00", CalendarComponents(weekday: 1, hour: 2, minute: 30), "Europe/Berlin", base: "2026-10-21 12:00:00",
                  ["2026-10-25 00:30:00", "2026-11-01 01:30:00"]),
        // 2027 spring forward
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2027-03-27 12:00:00",
                  ["2027-03-29 00:30:00", "2027-03-30 00:30:00"]),
        // 2027 fall back
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2027-10-30 12:00:00",
                  ["2027-10-31 00:30:00", "2027-11-01 01:30:00"]),
        // 2028 spring forward
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2028-03-25 12:00:00",
                  ["2028-03-27 00:30:00", "2028-03-28 00:30:00"]),
        // 2028 fall back
        OracleRow("*-*-* 02:30:00", CalendarComponents(hour: 2, minute: 30), "Europe/Berlin", base: "2028-10-28 12:00:00",
                  ["2028-10-29 00:30:00", "2028-10-30 01:30:00"]),
        // a date only in the gap: never
        OracleRow("2027-03-28 02:30:00", CalendarComponents(year: 2027, month: 3, day: 28, hour: 2, minute: 30), "Europe/Berlin", base: "2026-01-01 00:00:00",
                  []),
        // the 31st: months without one are skipped
        OracleRow("*-*-31 09:00:00", CalendarComponents(day: 31, hour: 9), "Europe/Berlin", base: "2027-01-15 00:00:00",
                  ["2027-01-31 08:00:00", "2027-03-31 07:00:00", "2027-05-31 07:00:00", "2027-07-31 07:00:00", "2027-08-31 07:00:00", "2027-10-31 08:00:00", "2027-12-31 08:00:00"]),
        // 29 February: common years are skipped
        OracleRow("*-02-29 09:00:00", CalendarComponents(month: 2, day: 29, hour: 9), "Europe/Berlin", base: "2026-01-01 00:00:00",
                  ["2028-02-29 08:00:00", "2032-02-29 08:00:00", "2036-02-29 08:00:00"]),
        // 31 April never comes
        OracleRow("*-04-31 00:00:00", CalendarComponents(month: 4, day: 31), "Europe/Berlin", base: "2026-01-01 00:00:00",
                  []),
        // 29 February on a Tuesday
        OracleRow("Tue *-02-29 00:00:00", CalendarComponents(month: 2, day: 29, weekday: 3), "Europe/Berlin", base: "2026-01-01 00:00:00",
                  ["2028-02-28 23:00:00", "2056-02-28 23:00:00"]),
        // spring forward: 01:30 skipped
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2026-03-28 12:00:00",
                  ["2026-03-30 00:30:00", "2026-03-31 00:30:00", "2026-04-01 00:30:00"]),
        // fall back: 01:30 once, the first (IST)
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2026-10-24 12:00:00",
                  ["2026-10-25 00:30:00", "2026-10-26 01:30:00", "2026-10-27 01:30:00"]),
        // base in the second pass (01:10 GMT)
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2026-10-25 01:10:00",
                  ["2026-10-25 01:30:00", "2026-10-26 01:30:00"]),
        // hourly across the gap
        OracleRow("*-*-* *:00:00", CalendarComponents(minute: 0), "Europe/Dublin", base: "2026-03-28 23:30:00",
                  ["2026-03-29 00:00:00", "2026-03-29 01:00:00", "2026-03-29 02:00:00", "2026-03-29 03:00:00"]),
        // hourly across the repeated hour (systemd PR #36897's case)
        OracleRow("*-*-* *:00:00", CalendarComponents(minute: 0), "Europe/Dublin", base: "2026-10-24 23:30:00",
                  ["2026-10-25 00:00:00", "2026-10-25 02:00:00", "2026-10-25 03:00:00", "2026-10-25 04:00:00"]),
        // every minute across the repeated hour
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Europe/Dublin", base: "2026-10-25 00:58:30",
                  ["2026-10-25 00:59:00", "2026-10-25 02:00:00", "2026-10-25 02:01:00"]),
        // Sundays 01:30 across spring forward
        OracleRow("Sun *-*-* 01:30:00", CalendarComponents(weekday: 1, hour: 1, minute: 30), "Europe/Dublin", base: "2026-03-25 12:00:00",
                  ["2026-04-05 00:30:00", "2026-04-12 00:30:00"]),
        // 2027 spring forward
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2027-03-27 12:00:00",
                  ["2027-03-29 00:30:00", "2027-03-30 00:30:00"]),
        // 2027 fall back
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2027-10-30 12:00:00",
                  ["2027-10-31 00:30:00", "2027-11-01 01:30:00"]),
        // 2028 spring forward
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2028-03-25 12:00:00",
                  ["2028-03-27 00:30:00", "2028-03-28 00:30:00"]),
        // 2028 fall back
        OracleRow("*-*-* 01:30:00", CalendarComponents(hour: 1, minute: 30), "Europe/Dublin", base: "2028-10-28 12:00:00",
                  ["2028-10-29 00:30:00", "2028-10-30 01:30:00"]),
        // midnight does not exist on 6 September: skipped
        OracleRow("*-*-* 00:00:00", CalendarComponents(hour: 0), "America/Santiago", base: "2026-09-04 12:00:00",
                  ["2026-09-05 04:00:00", "2026-09-07 03:00:00", "2026-09-08 03:00:00"]),
        // 00:30 skipped on the gap day
        OracleRow("*-*-* 00:30:00", CalendarComponents(hour: 0, minute: 30), "America/Santiago", base: "2026-09-04 12:00:00",
                  ["2026-09-05 04:30:00", "2026-09-07 03:30:00", "2026-09-08 03:30:00"]),
        // the 6th at midnight: September's is in the gap
        OracleRow("*-*-06 00:00:00", CalendarComponents(day: 6), "America/Santiago", base: "2026-08-10 00:00:00",
                  ["2026-10-06 03:00:00", "2026-11-06 03:00:00", "2026-12-06 03:00:00"]),
        // Sundays at midnight: the gap Sunday is skipped
        OracleRow("Sun *-*-* 00:00:00", CalendarComponents(weekday: 1), "America/Santiago", base: "2026-09-01 00:00:00",
                  ["2026-09-13 03:00:00", "2026-09-20 03:00:00", "2026-09-27 03:00:00"]),
        // fall back on Saturday: 23:30 once, the first (-03)
        OracleRow("*-*-* 23:30:00", CalendarComponents(hour: 23, minute: 30), "America/Santiago", base: "2026-04-03 12:00:00",
                  ["2026-04-04 02:30:00", "2026-04-05 02:30:00", "2026-04-06 03:30:00"]),
        // base in the second pass (23:10 -04)
        OracleRow("*-*-* 23:30:00", CalendarComponents(hour: 23, minute: 30), "America/Santiago", base: "2026-04-05 03:10:00",
                  ["2026-04-05 03:30:00", "2026-04-06 03:30:00"]),
        // hourly across the repeated hour
        OracleRow("*-*-* *:30:00", CalendarComponents(minute: 30), "America/Santiago", base: "2026-04-05 00:00:00",
                  ["2026-04-05 00:30:00", "2026-04-05 01:30:00", "2026-04-05 02:30:00", "2026-04-05 04:30:00", "2026-04-05 05:30:00"]),
        // hourly across the gap
        OracleRow("*-*-* *:30:00", CalendarComponents(minute: 30), "America/Santiago", base: "2026-09-06 01:00:00",
                  ["2026-09-06 01:30:00", "2026-09-06 02:30:00", "2026-09-06 03:30:00", "2026-09-06 04:30:00"]),
        // every minute across the repeated hour
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "America/Santiago", base: "2026-04-05 02:58:30",
                  ["2026-04-05 02:59:00", "2026-04-05 04:00:00", "2026-04-05 04:01:00"]),
        // every minute across the gap
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "America/Santiago", base: "2026-09-06 03:58:30",
                  ["2026-09-06 03:59:00", "2026-09-06 04:00:00", "2026-09-06 04:01:00"]),
        // 2027 gap
        OracleRow("*-*-* 00:00:00", CalendarComponents(hour: 0), "America/Santiago", base: "2027-09-03 12:00:00",
                  ["2027-09-04 04:00:00", "2027-09-06 03:00:00"]),
        // 2027 repeated hour
        OracleRow("*-*-* 23:30:00", CalendarComponents(hour: 23, minute: 30), "America/Santiago", base: "2027-04-02 12:00:00",
                  ["2027-04-03 02:30:00", "2027-04-04 02:30:00"]),
        // 2028 gap
        OracleRow("*-*-* 00:00:00", CalendarComponents(hour: 0), "America/Santiago", base: "2028-09-01 12:00:00",
                  ["2028-09-02 04:00:00", "2028-09-04 03:00:00"]),
        // 2028 repeated hour
        OracleRow("*-*-* 23:30:00", CalendarComponents(hour: 23, minute: 30), "America/Santiago", base: "2028-03-31 12:00:00",
                  ["2028-04-01 02:30:00", "2028-04-02 02:30:00"]),
        // 02:15 does not exist on 4 October: skipped
        OracleRow("*-*-* 02:15:00", CalendarComponents(hour: 2, minute: 15), "Australia/Lord_Howe", base: "2026-10-02 12:00:00",
                  ["2026-10-02 15:45:00", "2026-10-04 15:15:00", "2026-10-05 15:15:00"]),
        // 01:45 repeated on 5 April: once, the first (+11)
        OracleRow("*-*-* 01:45:00", CalendarComponents(hour: 1, minute: 45), "Australia/Lord_Howe", base: "2026-04-03 12:00:00",
                  ["2026-04-03 14:45:00", "2026-04-04 14:45:00", "2026-04-05 15:15:00"]),
        // base in the second pass (01:35 +1030)
        OracleRow("*-*-* 01:45:00", CalendarComponents(hour: 1, minute: 45), "Australia/Lord_Howe", base: "2026-04-04 15:05:00",
                  ["2026-04-04 15:15:00", "2026-04-05 15:15:00"]),
        // hourly at :15 across the gap
        OracleRow("*-*-* *:15:00", CalendarComponents(minute: 15), "Australia/Lord_Howe", base: "2026-10-03 13:00:00",
                  ["2026-10-03 13:45:00", "2026-10-03 14:45:00", "2026-10-03 16:15:00", "2026-10-03 17:15:00"]),
        // hourly at :45 across the repeated half hour
        OracleRow("*-*-* *:45:00", CalendarComponents(minute: 45), "Australia/Lord_Howe", base: "2026-04-04 13:00:00",
                  ["2026-04-04 13:45:00", "2026-04-04 14:45:00", "2026-04-04 16:15:00", "2026-04-04 17:15:00"]),
        // every minute across the gap
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Australia/Lord_Howe", base: "2026-10-03 15:28:30",
                  ["2026-10-03 15:29:00", "2026-10-03 15:30:00", "2026-10-03 15:31:00"]),
        // every minute across the repeated half hour
        OracleRow("*-*-* *:*:00", CalendarComponents(second: 0), "Australia/Lord_Howe", base: "2026-04-04 14:58:30",
                  ["2026-04-04 14:59:00", "2026-04-04 15:30:00", "2026-04-04 15:31:00"]),
        // Sundays 02:15 across the gap
        OracleRow("Sun *-*-* 02:15:00", CalendarComponents(weekday: 1, hour: 2, minute: 15), "Australia/Lord_Howe", base: "2026-09-30 12:00:00",
                  ["2026-10-10 15:15:00", "2026-10-17 15:15:00"]),
        // 2027 gap
        OracleRow("*-*-* 02:15:00", CalendarComponents(hour: 2, minute: 15), "Australia/Lord_Howe", base: "2027-10-01 12:00:00",
                  ["2027-10-01 15:45:00", "2027-10-03 15:15:00"]),
        // 2027 repeated half hour
        OracleRow("*-*-* 01:45:00", CalendarComponents(hour: 1, minute: 45), "Australia/Lord_Howe", base: "2027-04-02 12:00:00",
                  ["2027-04-02 14:45:00", "2027-04-03 14:45:00"]),
        // 2028 gap
        OracleRow("*-*-* 02:15:00", CalendarComponents(hour: 2, minute: 15), "Australia/Lord_Howe", base: "2028-09-29 12:00:00",
                  ["2028-09-29 15:45:00", "2028-10-01 15:15:00"]),
        // 2028 repeated half hour
        OracleRow("*-*-* 01:45:00", CalendarComponents(hour: 1, minute: 45), "Australia/Lord_Howe", base: "2028-03-31 12:00:00",
                  ["2028-03-31 14:45:00", "2028-04-01 14:45:00"]),
    ]

    @Test(arguments: Self.rows)
    func agreesWithSystemd(_ row: OracleRow) throws {
        #expect(row.components.description == row.spec)
        let zone = try ZoneFiles.rules(row.zone)
        var base = utc(row.base)
        var answers: [String] = []
        for _ in 0..<max(row.expected.count, 1) {
            guard let next = row.components.next(after: base, in: zone) else { break }
            answers.append(String(next.description.dropLast().replacing("T", with: " ")))
            base = next
        }
        #expect(answers == row.expected)
    }
}
