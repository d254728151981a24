/// Why bytes are not a time zone the scheduler can use.
public struct ZoneRulesError: Error, Sendable, Hashable, CustomStringConvertible {
    public var zone: String
    public var reason: String

    public init(zone: String, reason: String) {
        self.zone = zone
        self.reason = reason
    }

    public var description: String { "time zone '\(self.zone)' cannot be used: \(self.reason)" }
}

/// Reads a TZif file (RFC 8536, versions 1 to 4), such as /usr/share/zoneinfo/Europe/Berlin, into the transitions
/// and local time types that ``ZoneRules`` keeps. Version 1 files give their 32-bit data; later versions give the
/// 64-bit data and the footer, the POSIX TZ rule for instants past the last transition (Debian's files list
/// transitions only up to 2037 and rely on it).
///
/// Files with leap-second records (the `right/` zones) are refused: their transition times count leap seconds,
/// and the wall clock does not.
struct TZifReader {
    private let bytes: [UInt8]
    private var position = 0
    private let zone: String

    init(bytes: [UInt8], zone: String) {
        self.bytes = bytes
        self.zone = zone
    }

    struct Header {
        var version: UInt8
        var isUTCount: Int
        var isStandardCount: Int
        var leapCount: Int
        var timeCount: Int
        var typeCount: Int
        var charCount: Int

        /// Bytes of the data block that follows, with times of `timeSize` bytes.
        func blockSize(timeSize: Int) -> Int {
            self.timeCount * (timeSize + 1) + self.typeCount * 6 + self.charCount + self.leapCount * (timeSize + 4)
                + self.isStandardCount + self.isUTCount
        }
    }

    struct Contents {
        var transitions: [Int64]
        var typeIndices: [Int]
        var types: [ZoneRules.LocalTimeType]
        var footer: String?
    }

    private func fail(_ reason: String) -> ZoneRulesError { ZoneRulesError(zone: self.zone, reason: reason) }

    mutating func read() throws(ZoneRulesError) -> Contents {
        let first = try self.header(timeSize: 4)
        if first.version == 0 {
            return try self.block(first, timeSize: 4)
        }
        self.position += first.blockSize(timeSize: 4)
        let second = try self.header(timeSize: 8)
        var contents = try self.block(second, timeSize: 8)
        guard try self.byte() == UInt8(ascii: "\n") else { throw self.fail("the footer does not start with a newline") }
        var footer: [UInt8] = []
        while true {
            let byte = try self.byte()
            if byte == UInt8(ascii: "\n") { break }
            footer.append(byte)
        }
        contents.footer = footer.isEmpty ? nil : String(decoding: footer, as: UTF8.self)
        return contents
    }

    /// A header, whose data block has times of `timeSize` bytes.
    private mutating func header(timeSize: Int) throws(ZoneRulesError) -> Header {
        guard self.position + 44 <= self.bytes.count else { throw self.fail("shorter than a TZif header") }
        guard Array(self.bytes[self.position..<self.position + 4]) == Array("TZif".utf8) else {
            throw self.fail("not a TZif file (no 'TZif' at its start)")
        }
        let version = self.bytes[self.position + 4]
        guard version == 0 || (UInt8(ascii: "2")...UInt8(ascii: "4")).contains(version) else {
            throw self.fail("unknown TZif version byte \(version)")
        }
        self.position += 20
        var counts: [Int] = []
        for _ in 0..<6 {
            let count = try self.int32()
            guard count >= 0 else { throw self.fail("a negative count in the header") }
            counts.append(Int(count))
        }
        let header = Header(
            version: version, isUTCount: counts[0], isStandardCount: counts[1], leapCount: counts[2],
            timeCount: counts[3], typeCount: counts[4], charCount: counts[5]
        )
        guard header.typeCount >= 1 else { throw self.fail("no local time type") }
        guard header.leapCount == 0 else { throw self.fail("it counts leap seconds (a right/ zone); use the zone without them") }
        guard self.position + header.blockSize(timeSize: timeSize) <= self.bytes.count else {
            throw self.fail("the file is truncated")
        }
        return header
    }

    private mutating func block(_ header: Header, timeSize: Int) throws(ZoneRulesError) -> Contents {
        var transitions: [Int64] = []
        for _ in 0..<header.timeCount {
            if timeSize == 4 {
                transitions.append(Int64(try self.int32()))
            } else {
                transitions.append(try self.int64())
            }
        }
        for index in transitions.indices.dropFirst() where transitions[index] <= transitions[index - 1] {
            throw self.fail("transition times are not in ascending order")
        }
        var typeIndices: [Int] = []
        for _ in 0..<header.timeCount {
            let index = Int(try self.byte())
            guard index < header.typeCount else { throw self.fail("a transition names local time type \(index) of \(header.typeCount)") }
            typeIndices.append(index)
        }
        var raw: [(offset: Int32, isDST: Bool, designation: Int)] = []
        for _ in 0..<header.typeCount {
            let offset = try self.int32()
            guard offset != Int32.min, abs(Int(offset)) < 26 * 3600 else { throw self.fail("a UT offset of \(offset) s") }
            let isDST = try self.byte()
            guard isDST <= 1 else { throw self.fail("a DST flag of \(isDST)") }
            let designation = Int(try self.byte())
            guard designation < header.charCount else { throw self.fail("a designation index past the designations") }
            raw.append((offset, isDST == 1, designation))
        }
        let characters = Array(self.bytes[self.position..<self.position + header.charCount])
        self.position += header.charCount + header.isStandardCount + header.isUTCount
        let types = raw.map { type in
            let name = characters[type.designation...].prefix { $0 != 0 }
            return ZoneRules.LocalTimeType(
                utOffset: Int(type.offset), isDST: type.isDST, abbreviation: String(decoding: name, as: UTF8.self)
            )
        }
        return Contents(transitions: transitions, typeIndices: typeIndices, types: types, footer: nil)
    }

    private mutating func byte() throws(ZoneRulesError) -> UInt8 {
        guard self.position < self.bytes.count else { throw self.fail("the file is truncated") }
        defer { self.position += 1 }
        return self.bytes[self.position]
    }

    private mutating func int32() throws(ZoneRulesError) -> Int32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = try value << 8 | UInt32(self.byte()) }
        return Int32(bitPattern: value)
    }

    private mutating func int64() throws(ZoneRulesError) -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = try value << 8 | UInt64(self.byte()) }
        return Int64(bitPattern: value)
    }
}
