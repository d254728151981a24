/// The date and time components of a calendar trigger: any subset of year, month, day, weekday, hour, minute and
/// second, as Apple's `UNCalendarNotificationTrigger` takes them. Weekdays count 1 = Sunday … 7 = Saturday.
///
/// A component left out above the smallest one given matches any value; one left out below it is its first value
/// (month 1, day 1, 00:00:00). So `hour: 8, minute: 30` is every day at 08:30:00, `minute: 15` every hour at
/// :15:00, `weekday: 2` every Monday at 00:00:00, `month: 2, day: 29` every 29 February at midnight. In systemd's
/// calendar syntax (``description``) those are `*-*-* 08:30:00`, `*-*-* *:15:00`, `Mon *-*-* 00:00:00` and
/// `*-02-29 00:00:00`.
public struct CalendarComponents: Sendable, Hashable, CustomStringConvertible {
    public var year: Int?
    public var month: Int?
    public var day: Int?
    public var weekday: Int?
    public var hour: Int?
    public var minute: Int?
    public var second: Int?

    /// The last year a rule's dates are searched in, as systemd's calendar specifications.
    public static let lastYear = 2199

    public init(
        year: Int? = nil, month: Int? = nil, day: Int? = nil, weekday: Int? = nil,
        hour: Int? = nil, minute: Int? = nil, second: Int? = nil
    ) {
        self.year = year
        self.month = month
        self.day = day
        self.weekday = weekday
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// The values each component must take (`nil`: any), with the defaults below the smallest given component.
    private var pattern: CalendarComponents {
        let given = [
            self.year != nil, self.month != nil, self.day != nil || self.weekday != nil,
            self.hour != nil, self.minute != nil, self.second != nil,
        ]
        let smallest = given.lastIndex(of: true) ?? -1
        var pattern = self
        if smallest < 1 { pattern.month = pattern.month ?? 1 }
        if smallest < 2 { pattern.day = pattern.day ?? 1 }
        if smallest < 3 { pattern.hour = pattern.hour ?? 0 }
        if smallest < 4 { pattern.minute = pattern.minute ?? 0 }
        if smallest < 5 { pattern.second = pattern.second ?? 0 }
        return pattern
    }

    /// Checks that some component is given and each is in its range.
    /// - Throws: ``AlertError/noComponents`` or ``AlertError/componentOutOfRange(name:value:range:)``.
    public func validate() throws(AlertError) {
        let checks: [(String, Int?, ClosedRange<Int>)] = [
            ("year", self.year, 1970...Self.lastYear), ("month", self.month, 1...12), ("day", self.day, 1...31),
            ("weekday", self.weekday, 1...7), ("hour", self.hour, 0...23), ("minute", self.minute, 0...59),
            ("second", self.second, 0...59),
        ]
        guard checks.contains(where: { $0.1 != nil }) else { throw .noComponents }
        for (name, value, range) in checks {
            if let value, !range.contains(value) { throw .componentOutOfRange(name: name, value: value, range: range) }
        }
    }

    /// In systemd's calendar syntax, with the defaults spelled out: `Mon *-*-* 08:30:00`.
    public var description: String {
        let pattern = self.pattern
        func field(_ value: Int?, _ width: Int) -> String {
            guard let value else { return "*" }
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let weekday = pattern.weekday.map { (1...7).contains($0) ? weekdays[$0 - 1] + " " : "?" } ?? ""
        return "\(weekday)\(field(pattern.year, 4))-\(field(pattern.month, 2))-\(field(pattern.day, 2)) "
            + "\(field(pattern.hour, 2)):\(field(pattern.minute, 2)):\(field(pattern.second, 2))"
    }

    /// The first instant strictly after `base`, in whole seconds, whose wall time in `zone` matches every
    /// component; `nil` if there is none up to ``lastYear``.
    ///
    /// The search follows systemd's `calendar_spec_next_usec` (systemd 252, checked against
    /// `systemd-analyze calendar` in the tests): it walks wall times forward from the wall time just after `base`.
    /// - A day that does not exist (the 31st of a 30-day month, 29 February of a common year) is skipped, never
    ///   moved to another day.
    /// - A wall time in a gap (clocks set forward) is skipped: `02:30` on the spring-forward day in Berlin does not
    ///   fire that day.
    /// - A repeated wall time (clocks set back) fires once, at its first occurrence after `base`: when `base` is in
    ///   the first pass through the repeated hour, the walk moves on past the whole hour in wall time, so the second
    ///   pass fires nothing, not even a rule of every minute (what systemd issue #8647 reports, and what this
    ///   follows: each wall time fires once); when `base` is already in the second pass, the second occurrence is
    ///   the first one after it.
    public func next(after base: WallTime, in zone: ZoneRules) -> WallTime? {
        let pattern = self.pattern
        let first = base.seconds + 1
        var wall = zone.localTime(atSeconds: first)
        // Each round moves past one wall time that has no instant after `base`: a gap, or a repeated time already
        // passed. A few rounds suffice; the bound only stops a zone file of absurd transitions.
        for _ in 0..<100_000 {
            guard let match = pattern.firstMatch(atOrAfter: wall) else { return nil }
            let instants = zone.instants(for: match)
            if let instant = instants.first(where: { $0 >= first }) { return WallTime(seconds: instant) }
            if instants.isEmpty, let end = zone.endOfGap(containing: match) {
                wall = end
            } else {
                wall = LocalDateTime(localSeconds: match.localSeconds + 1)
            }
        }
        return nil
    }

    /// The first wall time at or after `start` that matches this pattern, ignoring time zones.
    private func firstMatch(atOrAfter start: LocalDateTime) -> LocalDateTime? {
        var (year, month, day) = (start.year, start.month, start.day)
        var from: (hour: Int, minute: Int, second: Int) = (start.hour, start.minute, start.second)
        func nextDay() {
            let date = LocalDateTime.civil(fromDays: LocalDateTime.days(year: year, month: month, day: day) + 1)
            (year, month, day) = (date.year, date.month, date.day)
            from = (0, 0, 0)
        }
        func nextMonth() {
            (year, month, day) = month == 12 ? (year + 1, 1, 1) : (year, month + 1, 1)
            from = (0, 0, 0)
        }
        while year <= Self.lastYear {
            if let wanted = self.year {
                if year > wanted { return nil }
                if year < wanted {
                    (year, month, day) = (wanted, 1, 1)
                    from = (0, 0, 0)
                    continue
                }
            }
            if let wanted = self.month, wanted != month {
                if month > wanted { (year, month, day) = (year + 1, wanted, 1) } else { (month, day) = (wanted, 1) }
                from = (0, 0, 0)
                continue
            }
            if let wanted = self.day, wanted != day {
                if day > wanted || wanted > LocalDateTime.daysIn(month: month, year: year) {
                    nextMonth()
                } else {
                    day = wanted
                    from = (0, 0, 0)
                }
                continue
            }
            if let wanted = self.weekday,
                LocalDateTime(year: year, month: month, day: day).weekday != wanted
            {
                nextDay()
                continue
            }
            if let time = self.firstTime(from: from) {
                return LocalDateTime(year: year, month: month, day: day, hour: time.hour, minute: time.minute, second: time.second)
            }
            nextDay()
        }
        return nil
    }

    /// The first time of day at or after `start` that matches the hour, minute and second.
    private func firstTime(from start: (hour: Int, minute: Int, second: Int)) -> (hour: Int, minute: Int, second: Int)? {
        let hours = self.hour.map { $0...$0 } ?? 0...23
        let minutes = self.minute.map { $0...$0 } ?? 0...59
        for hour in hours where hour >= start.hour {
            let firstMinute = hour == start.hour ? start.minute : 0
            for minute in minutes where minute >= firstMinute {
                let firstSecond = hour == start.hour && minute == start.minute ? start.second : 0
                if let second = self.second {
                    if second >= firstSecond { return (hour, minute, second) }
                } else {
                    return (hour, minute, firstSecond)
                }
            }
        }
        return nil
    }
}
