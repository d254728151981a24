#if canImport(Glibc)
import Glibc
#endif

// Strings and numbers: how a JSON text's scalars are read, in place and without copying where they can be.
extension JSONParser {
    /// A member's name, as a string.
    func string(_ name: JSONMemberName) throws(JSONParseError) -> String {
        if name.plainASCII, name.characters.count <= Self.smallString {
            return Self.smallASCIIString(UnsafeBufferPointer(rebasing: self.bytes[name.characters]))
        }
        // Escaped, long or not ASCII: read again, the way any string is.
        var parser = self
        parser.index = name.characters.lowerBound - 1
        return try parser.parseString()
    }

    /// Whether a member's name is `known` (an ASCII name without escapes, as a caller spells the names it reads).
    func name(_ name: JSONMemberName, is known: StaticString) -> Bool {
        guard name.plainASCII else { return (try? self.string(name)) == known.description }
        guard name.characters.count == known.utf8CodeUnitCount, let base = self.bytes.baseAddress else { return false }
        return memcmp(base + name.characters.lowerBound, known.utf8Start, known.utf8CodeUnitCount) == 0
    }

    mutating func parseString() throws(JSONParseError) -> String {
        self.index += 1  // opening quote
        // Runs of plain bytes are decoded in one go; escapes are handled one by one. A string without escapes (most
        // of them) is one run, decoded straight into the result.
        var built: String?
        var runStart = self.index
        // The bytes of the run ORed together: its top bit says whether the run is all ASCII, which needs no check.
        var seen: UInt64 = 0
        // Given the parser's parts rather than the parser: passing the parser copied it (and retained its cache).
        func run(
            _ bytes: UnsafeBufferPointer<UInt8>,
            _ strings: JSONStringCache?,
            upTo end: Int,
            ascii: Bool
        ) throws(JSONParseError) -> String {
            let run = UnsafeBufferPointer(rebasing: bytes[runStart..<end])
            if ascii, run.count <= Self.smallString { return Self.smallASCIIString(run) }
            if ascii, let strings, JSONStringCache.lengths.contains(run.count) {
                if let kept = strings.string(run) { return kept }
                let made = String(decoding: run, as: UTF8.self)
                strings.keep(made, bytes: run)
                return made
            }
            if ascii { return String(decoding: run, as: UTF8.self) }
            guard let text = String(validating: run, as: UTF8.self) else {
                throw JSONParseError(offset: runStart, reason: "string is not valid UTF-8")
            }
            return text
        }
        while true {
            self.index = Self.plainBytes(in: self.bytes, from: self.index, seen: &seen)
            guard self.index < self.bytes.count else { throw self.error("unterminated string") }
            let byte = self.bytes[self.index]
            switch byte {
            case UInt8(ascii: "\""):
                let tail = try run(self.bytes, self.strings, upTo: self.index, ascii: seen & Self.topBits == 0)
                self.index += 1
                guard var text = built else { return tail }
                text += tail
                return text
            case UInt8(ascii: "\\"):
                var text = built ?? ""
                built = nil  // the only reference, so appending does not copy
                text += try run(self.bytes, self.strings, upTo: self.index, ascii: seen & Self.topBits == 0)
                self.index += 1
                text.unicodeScalars.append(try self.parseEscape())
                built = text
                runStart = self.index
                seen = 0
            default:
                throw self.error("control character in string")
            }
        }
    }

    /// Up to fifteen ASCII bytes (member names, most short values) fit in a string itself.
    static let smallString = 15

    /// A string of at most ``smallString`` ASCII bytes, made without the UTF-8 check and repair pass that
    /// `String(decoding:)` makes.
    static func smallASCIIString(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(bytes))
            return bytes.count
        }
    }

    static let topBits: UInt64 = 0x8080_8080_8080_8080
    static let lowBits: UInt64 = 0x0101_0101_0101_0101

    /// The index of the first byte from `start` that ends a run of plain string bytes (a quote, a backslash or a
    /// control character), or the end; the run's bytes are ORed into `seen`. Sixteen bytes are tested at a time
    /// with vector compares, and the last few eight at a time with bit tricks: a payload's long strings are most of
    /// what a post carries, and a byte at a time cost about twenty instructions each.
    @inline(__always)
    static func plainBytes(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, seen: inout UInt64) -> Int {
        guard let base = bytes.baseAddress else { return start }
        var index = start
        // Constants here, not static: a static is reached through a one-time initialization check on every use.
        let quotes = SIMD16<UInt8>(repeating: UInt8(ascii: "\""))
        let backslashes = SIMD16<UInt8>(repeating: UInt8(ascii: "\\"))
        let spaces = SIMD16<UInt8>(repeating: 0x20)
        while bytes.count - index >= 16 {
            let chunk = UnsafeRawPointer(base + index).loadUnaligned(as: SIMD16<UInt8>.self)
            let stops = (chunk .== quotes) .| (chunk .== backslashes) .| (chunk .< spaces)
            // Each half as an integer (a stop's byte is all ones; little-endian, so the lowest byte comes first):
            // `any(stops)` and the like are out-of-line calls.
            let flags = unsafeBitCast(stops, to: SIMD2<UInt64>.self)
            let words = unsafeBitCast(chunk, to: SIMD2<UInt64>.self)
            if flags[0] != 0 { return index + Self.bytesBefore(flags[0], in: words[0], seen: &seen) }
            seen |= words[0]
            if flags[1] != 0 { return index + 8 + Self.bytesBefore(flags[1], in: words[1], seen: &seen) }
            seen |= words[1]
            index += 16
        }
        while bytes.count - index >= 8 {
            let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
            let quote = word ^ (Self.lowBits &* UInt64(UInt8(ascii: "\"")))
            let backslash = word ^ (Self.lowBits &* UInt64(UInt8(ascii: "\\")))
            // Each term sets the top bit of the lowest byte that is zero (below 0x20 for the last); a term can also
            // flag bytes above a true hit, never below it, so the lowest flag is always a true one.
            let flags =
                ((quote &- Self.lowBits) & ~quote | (backslash &- Self.lowBits) & ~backslash
                    | (word &- Self.lowBits &* 0x20) & ~word) & Self.topBits
            if flags != 0 { return index + Self.bytesBefore(flags, in: word, seen: &seen) }
            seen |= word
            index += 8
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return index }
            seen |= UInt64(byte)
            index += 1
        }
        return index
    }

    /// The bytes of `word` before its first stop (the lowest byte flagged in `flags`, little-endian), 0 to 7;
    /// those bytes are ORed into `seen`.
    @inline(__always)
    static func bytesBefore(_ flags: UInt64, in word: UInt64, seen: inout UInt64) -> Int {
        let plain = flags.trailingZeroBitCount / 8
        seen |= word & ((1 &<< UInt64(plain * 8)) &- 1)
        return plain
    }

    mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
        guard self.index < self.bytes.count else { throw self.error("unterminated escape") }
        let byte = self.bytes[self.index]
        self.index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try self.parseHex4()
            if (0xD800..<0xDC00).contains(unit) {
                guard self.bytes.count - self.index >= 6, self.bytes[self.index] == UInt8(ascii: "\\"),
                    self.bytes[self.index + 1] == UInt8(ascii: "u")
                else { throw self.error("unpaired high surrogate") }
                self.index += 2
                let low = try self.parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw self.error("invalid low surrogate") }
                let value = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                return Unicode.Scalar(value)!  // in range by construction
            }
            guard let scalar = Unicode.Scalar(UInt32(unit)) else { throw self.error("unpaired low surrogate") }
            return scalar
        default:
            throw self.error("invalid escape '\\\(Self.printable(byte))'")
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        guard self.bytes.count - self.index >= 4 else { throw self.error("truncated \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.error("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt16(digit)
            self.index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = self.index
        let isInteger = try self.scanNumber()
        return try self.number(from: start, isInteger: isInteger)
    }

    /// Reads past a number's text, checking its grammar; returns whether it is an integer (no fraction, no
    /// exponent).
    mutating func scanNumber() throws(JSONParseError) -> Bool {
        var isInteger = true
        if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
        guard self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) else {
            throw self.error("expected a digit")
        }
        if self.bytes[self.index] == UInt8(ascii: "0") {
            self.index += 1
        } else {
            self.skipDigits()
        }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            guard self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) else {
                throw self.error("expected a digit after '.'")
            }
            self.skipDigits()
        }
        if self.index < self.bytes.count, self.bytes[self.index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            self.index += 1
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-") {
                self.index += 1
            }
            guard self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) else {
                throw self.error("expected a digit in exponent")
            }
            self.skipDigits()
        }
        return isInteger
    }

    /// The number whose text runs from `start` to here.
    func number(from start: Int, isInteger: Bool) throws(JSONParseError) -> JSONValue {
        let text = String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]), as: UTF8.self)
        if isInteger, let value = Int64(text) {
            return .int(value)
        }
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(offset: start, reason: "number out of range")
        }
        return .double(value)
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    mutating func skipDigits() {
        while self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) { self.index += 1 }
    }
}
