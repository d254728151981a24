/// The POSIX TZ rule in a TZif footer (RFC 8536 §3.3, POSIX `TZ` with the version 3 extensions), such as
/// `CET-1CEST,M3.5.0,M10.5.0/3` or `<-04>4<-03>,M9.1.6/24,M4.1.6/24`: the offsets and yearly transitions that hold
/// past a zone's last listed transition.
///
/// POSIX offsets count westward (`CET-1` is one hour east of UTC); they are kept here as UT offsets, eastward.
/// A rule's time of day may be negative or past 24 hours (version 3). A rule with DST and no transition dates is
/// refused: RFC 8536 footers always give them.
struct PosixTimeZoneRule: Sendable, Hashable {
    /// When in a year a transition happens.
    enum DateRule: Sendable, Hashable {
        /// `Jn`: day 1–365, 29 February never counted.
        case julianSkippingLeapDay(Int)
        /// `n`: day 0–365, 29 February counted.
        case dayOfYear(Int)
        /// `Mm.w.d`: weekday `d` (0 = Sunday) of week `w` (1–4, 5 = the last) of month `m`.
        case monthWeekDay(month: Int, week: Int, weekday: Int)

        /// Days from 1970-01-01 to this rule's day in `year`.
        func days(in year: Int) -> Int64 {
            let january1 = LocalDateTime.days(year: year, month: 1, day: 1)
            switch self {
            case .julianSkippingLeapDay(let n):
                return january1 + Int64(n - 1) + (LocalDateTime.isLeap(year) && n >= 60 ? 1 : 0)
            case .dayOfYear(let n):
                return january1 + Int64(n)
            case .monthWeekDay(let month, let week, let weekday):
                let first = LocalDateTime.days(year: year, month: month, day: 1)
                let firstWeekday = Int((first + 4).floorModulo(7))
                var day = 1 + (weekday - firstWeekday + 7) % 7 + 7 * (week - 1)
                while day > LocalDateTime.daysIn(month: month, year: year) { day -= 7 }
                return first + Int64(day - 1)
            }
        }
    }

    struct Daylight: Sendable, Hashable {
        var type: ZoneRules.LocalTimeType
        var start: DateRule
        /// Seconds after local midnight (standard time) that DST starts.
        var startTime: Int
        var end: DateRule
        /// Seconds after local midnight (DST) that DST ends.
        var endTime: Int
    }

    var standard: ZoneRules.LocalTimeType
    var daylight: Daylight?

    /// The rule's transitions in `year`, in order: each instant (UTC seconds) and the type from then on.
    func transitions(in year: Int) -> [(at: Int64, type: ZoneRules.LocalTimeType)] {
        guard let daylight = self.daylight else { return [] }
        let start = daylight.start.days(in: year) * 86_400 + Int64(daylight.startTime) - Int64(self.standard.utOffset)
        let end = daylight.end.days(in: year) * 86_400 + Int64(daylight.endTime) - Int64(daylight.type.utOffset)
        return [(start, daylight.type), (end, self.standard)].sorted { $0.at < $1.at }
    }

    /// The local time type at `instant` (UTC seconds).
    func type(at instant: Int64) -> ZoneRules.LocalTimeType {
        guard self.daylight != nil else { return self.standard }
        let year = LocalDateTime(localSeconds: instant + Int64(self.standard.utOffset)).year
        var current = self.standard
        for candidate in year - 1...year + 1 {
            for transition in self.transitions(in: candidate) where transition.at <= instant { current = transition.type }
        }
        return current
    }
}

extension PosixTimeZoneRule {
    /// Parses a footer; `zone` names the file in errors.
    init(parsing text: String, zone: String) throws(ZoneRulesError) {
        var parser = Parser(characters: Array(text.utf8), zone: zone, text: text)
        self = try parser.rule()
    }

    private struct Parser {
        let characters: [UInt8]
        var position = 0
        let zone: String
        let text: String

        init(characters: [UInt8], zone: String, text: String) {
            self.characters = characters
            self.zone = zone
            self.text = text
        }

        func fail(_ what: String) -> ZoneRulesError {
            ZoneRulesError(zone: self.zone, reason: "its TZ rule '\(self.text)' has \(what) at character \(self.position + 1)")
        }

        var peek: UInt8? { self.position < self.characters.count ? self.characters[self.position] : nil }

        mutating func rule() throws(ZoneRulesError) -> PosixTimeZoneRule {
            let standardName = try self.name()
            let standardOffset = try -self.time(maximumHours: 24)
            let standard = ZoneRules.LocalTimeType(utOffset: standardOffset, isDST: false, abbreviation: standardName)
            guard self.peek != nil else { return PosixTimeZoneRule(standard: standard, daylight: nil) }
            let daylightName = try self.name()
            var daylightOffset = standardOffset + 3600
            if let next = self.peek, next != UInt8(ascii: ",") { daylightOffset = try -self.time(maximumHours: 24) }
            guard self.peek == UInt8(ascii: ",") else { throw self.fail("DST without the dates it starts and ends") }
            self.position += 1
            let (start, startTime) = try self.transition()
            guard self.peek == UInt8(ascii: ",") else { throw self.fail("no end date for DST") }
            self.position += 1
            let (end, endTime) = try self.transition()
            guard self.peek == nil else { throw self.fail("unexpected text") }
            let type = ZoneRules.LocalTimeType(utOffset: daylightOffset, isDST: true, abbreviation: daylightName)
            return PosixTimeZoneRule(
                standard: standard,
                daylight: Daylight(type: type, start: start, startTime: startTime, end: end, endTime: endTime)
            )
        }

        mutating func name() throws(ZoneRulesError) -> String {
            let start = self.position
            if self.peek == UInt8(ascii: "<") {
                self.position += 1
                while let character = self.peek, character != UInt8(ascii: ">") { self.position += 1 }
                guard self.peek != nil else { throw self.fail("an unclosed '<'") }
                self.position += 1
                return String(decoding: self.characters[start + 1..<self.position - 1], as: UTF8.self)
            }
            while let character = self.peek, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(character | 0x20) {
                self.position += 1
            }
            guard self.position - start >= 3 else { throw self.fail("a zone abbreviation shorter than 3 letters") }
            return String(decoding: self.characters[start..<self.position], as: UTF8.self)
        }

        mutating func number(maximum: Int) throws(ZoneRulesError) -> Int {
            var value = 0
            var digits = 0
            while let character = self.peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(character) {
                value = value * 10 + Int(character - UInt8(ascii: "0"))
                digits += 1
                self.position += 1
                guard value <= maximum else { throw self.fail("a number over \(maximum)") }
            }
            guard digits > 0 else { throw self.fail("no number") }
            return value
        }

        /// `[+-]hh[:mm[:ss]]`, in seconds.
        mutating func time(maximumHours: Int) throws(ZoneRulesError) -> Int {
            var sign = 1
            if self.peek == UInt8(ascii: "+") || self.peek == UInt8(ascii: "-") {
                sign = self.peek == UInt8(ascii: "-") ? -1 : 1
                self.position += 1
            }
            var seconds = try self.number(maximum: maximumHours) * 3600
            if self.peek == UInt8(ascii: ":") {
                self.position += 1
                seconds += try self.number(maximum: 59) * 60
                if self.peek == UInt8(ascii: ":") {
                    self.position += 1
                    seconds += try self.number(maximum: 59)
                }
            }
            return sign * seconds
        }

        /// `date[/time]`; the time is 02:00 when not given.
        mutating func transition() throws(ZoneRulesError) -> (DateRule, Int) {
            let date: DateRule
            switch self.peek {
            case UInt8(ascii: "J"):
                self.position += 1
                let day = try self.number(maximum: 365)
                guard day >= 1 else { throw self.fail("day J0") }
                date = .julianSkippingLeapDay(day)
            case UInt8(ascii: "M"):
                self.position += 1
                let month = try self.number(maximum: 12)
                guard month >= 1, self.peek == UInt8(ascii: ".") else { throw self.fail("a bad month") }
                self.position += 1
                let week = try self.number(maximum: 5)
                guard week >= 1, self.peek == UInt8(ascii: ".") else { throw self.fail("a bad week") }
                self.position += 1
                date = .monthWeekDay(month: month, week: week, weekday: try self.number(maximum: 6))
            default:
                date = .dayOfYear(try self.number(maximum: 365))
            }
            var time = 7200
            if self.peek == UInt8(ascii: "/") {
                self.position += 1
                time = try self.time(maximumHours: 167)
            }
            return (date, time)
        }
    }
}
