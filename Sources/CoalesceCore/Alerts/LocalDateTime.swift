/// A date and a time of day as a wall shows them, in no time zone: proleptic Gregorian, seconds 0–59 (the zone
/// files read here carry no leap seconds).
public struct LocalDateTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// The wall time `localSeconds` after 1970-01-01 00:00:00 on the same wall (an instant's seconds plus the
    /// zone's offset at it).
    public init(localSeconds: Int64) {
        let days = localSeconds.floorDivided(by: 86_400)
        let secondOfDay = Int(localSeconds - days * 86_400)
        let date = Self.civil(fromDays: days)
        self.init(
            year: date.year, month: date.month, day: date.day,
            hour: secondOfDay / 3600, minute: secondOfDay / 60 % 60, second: secondOfDay % 60
        )
    }

    /// Seconds after 1970-01-01 00:00:00 on the same wall.
    public var localSeconds: Int64 {
        Self.days(year: self.year, month: self.month, day: self.day) * 86_400
            + Int64(self.hour * 3600 + self.minute * 60 + self.second)
    }

    /// The day of the week, 1 = Sunday … 7 = Saturday (as Apple's `DateComponents.weekday`).
    public var weekday: Int { Int((Self.days(year: self.year, month: self.month, day: self.day) + 4).floorModulo(7)) + 1 }

    /// Whether the day exists in its month (not the 31st of a 30-day month, nor 29 February of a common year).
    public var dateExists: Bool {
        (1...12).contains(self.month) && self.day >= 1 && self.day <= Self.daysIn(month: self.month, year: self.year)
    }

    public static func < (lhs: LocalDateTime, rhs: LocalDateTime) -> Bool {
        (lhs.year, lhs.month, lhs.day, lhs.hour, lhs.minute, lhs.second)
            < (rhs.year, rhs.month, rhs.day, rhs.hour, rhs.minute, rhs.second)
    }

    /// `2027-03-28T02:30:00`.
    public var isoText: String {
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(self.year, 4))-\(pad(self.month, 2))-\(pad(self.day, 2))T"
            + "\(pad(self.hour, 2)):\(pad(self.minute, 2)):\(pad(self.second, 2))"
    }

    public var description: String { self.isoText }

    public static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return self.isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01.
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
