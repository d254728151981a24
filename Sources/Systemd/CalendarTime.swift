#if canImport(Glibc)
import Glibc
#endif

/// Seconds since the Unix epoch as a calendar date and time, in UTC or in the zone of this process (`$TZ`, else
/// /etc/localtime): for what a person reads or types, such as STATUS= lines and coalescectl's dates.
public enum CalendarTime {
    /// A date and a time of day, numbered as people number them (month 1–12, the year in full).
    public struct Parts: Sendable, Hashable {
        public var year: Int32
        public var month: Int32
        public var day: Int32
        public var hour: Int32
        public var minute: Int32
        public var second: Int32

        public init(year: Int32, month: Int32, day: Int32, hour: Int32, minute: Int32, second: Int32) {
            self.year = year
            self.month = month
            self.day = day
            self.hour = hour
            self.minute = minute
            self.second = second
        }

        init(_ parts: tm) {
            self.init(
                year: parts.tm_year + 1900, month: parts.tm_mon + 1, day: parts.tm_mday, hour: parts.tm_hour,
                minute: parts.tm_min, second: parts.tm_sec)
        }
    }

    /// The local date and time `seconds` after the epoch, its fraction dropped, written with strftime(3)'s
    /// `format`: `%Z` names the zone as the local time has it (`CET`, `CEST`). Empty when the text would be longer
    /// than 63 bytes.
    public static func localText(_ seconds: Double, format: String) -> String {
        var time = time_t(seconds)
        var parts = tm()
        localtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, format, &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The seconds since the epoch of the local date and time `parts`, whether daylight saving time is in force
    /// then left to the zone's rules (mktime); `nil` for one the C library cannot place.
    public static func seconds(ofLocal parts: Parts) -> Int? {
        var value = tm()
        value.tm_year = parts.year - 1900
        value.tm_mon = parts.month - 1
        value.tm_mday = parts.day
        value.tm_hour = parts.hour
        value.tm_min = parts.minute
        value.tm_sec = parts.second
        value.tm_isdst = -1
        let seconds = mktime(&value)
        return seconds == -1 ? nil : Int(seconds)
    }
}
