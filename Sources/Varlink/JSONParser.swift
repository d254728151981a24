#if canImport(Glibc)
import Glibc
#endif

/// Where a member's name lies in the input being parsed, checked but not yet made into a string (see
/// ``JSONParser/string(_:)`` and ``JSONParser/name(_:is:)``).
struct JSONMemberName {
    /// The bytes between the quotes.
    var characters: Range<Int>
    /// No escapes and nothing but ASCII: the bytes are the name.
    var plainASCII: Bool
}

/// Why a byte sequence is not the JSON text we accept.
public struct JSONParseError: Error, Hashable, CustomStringConvertible {
    /// Byte offset of the problem within the message.
    public var offset: Int
    /// What was wrong, for a person.
    public var reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "invalid JSON at byte \(self.offset): \(self.reason)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Written here rather than taken from Foundation so that errors name the byte where the text went wrong, integers
/// stay integers, and nesting is bounded: a peer can send `[[[[…` a million deep without overflowing our stack.
public struct JSONParser {
    /// Deeper nesting than this is refused; Varlink messages are shallow.
    public static let maximumDepth = 128

    /// The input, valid only while `parse` runs: read in place, never copied.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int = 0
    private var depth: Int = 0
    /// Strings the input's sender repeats, when the caller keeps them.
    private let strings: JSONStringCache?

    private init(bytes: UnsafeBufferPointer<UInt8>, strings: JSONStringCache?) {
        self.bytes = bytes
        self.strings = strings
    }

    /// Parses one JSON value that must fill the whole input, surrounding white space aside.
    public static func parse<Bytes: Collection<UInt8>>(_ input: Bytes) throws(JSONParseError) -> JSONValue {
        try Self.parseWhole(input) { parser throws(JSONParseError) in try parser.parseValue() }
    }

    /// Parses a JSON text that should be an object, handing over its members in order (a repeated name: each time)
    /// instead of building a dictionary: for a message whose few known members are read once. Returns false when
    /// the text is valid JSON but not an object.
    /// - Parameter strings: where strings the sender repeats are kept between its messages.
    public static func parseMembers<Bytes: Collection<UInt8>>(
        _ input: Bytes,
        strings: JSONStringCache? = nil,
        _ member: (consuming String, consuming JSONValue) -> Void
    ) throws(JSONParseError) -> Bool {
        try Self.readMembers(input, strings: strings) { name, parser throws(JSONParseError) in
            member(try parser.string(name), try parser.parseValue())
        }
    }

    /// As ``parseMembers(_:strings:_:)``, but `member` reads each member's value itself from the parser it is
    /// given (``parseValue()``, ``parseValue(keepingAsText:)`` or ``skipValue()``), all of it, before the next.
    /// Returns false when the text is valid JSON but not an object.
    static func readMembers<Bytes: Collection<UInt8>>(
        _ input: Bytes,
        strings: JSONStringCache? = nil,
        _ member: (JSONMemberName, inout JSONParser) throws(JSONParseError) -> Void
    ) throws(JSONParseError) -> Bool {
        try Self.parseWhole(input, strings: strings) { parser throws(JSONParseError) in
            guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "{") else {
                _ = try parser.skipValue()
                return false
            }
            try parser.enterContainer()
            try parser.parseMembers(member)
            parser.depth -= 1
            return true
        }
    }

    /// Runs `body` over the whole input, white space around it allowed and nothing after it. The bytes are read
    /// where they are (a received buffer, an array) when contiguous, as they almost always are.
    static func parseWhole<Bytes: Collection<UInt8>, T>(
        _ input: Bytes,
        strings: JSONStringCache? = nil,
        _ body: (inout JSONParser) throws(JSONParseError) -> T
    ) throws(JSONParseError) -> T {
        func run(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<T, JSONParseError> {
            var parser = JSONParser(bytes: bytes, strings: strings)
            do throws(JSONParseError) {
                parser.skipWhitespace()
                let value = try body(&parser)
                parser.skipWhitespace()
                if parser.index != parser.bytes.count {
                    throw parser.error("unexpected data after the JSON value")
                }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        let result = input.withContiguousStorageIfAvailable(run) ?? Array(input).withUnsafeBufferPointer(run)
        return try result.get()
    }

    /// Parses a JSON text given as a string.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try self.parse(Array(text.utf8))
    }

    private func error(_ reason: String) -> JSONParseError {
        JSONParseError(offset: self.index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case 0x20, 0x0A, 0x0D, 0x09: self.index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard self.index < self.bytes.count else { throw self.error("unexpected end of input") }
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"): return try self.parseObject()
        case UInt8(ascii: "["): return try self.parseArray()
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"): try self.expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.parseNumber()
        default: throw self.error("unexpected character '\(Self.printable(self.bytes[self.index]))'")
        }
    }

    private static func printable(_ byte: UInt8) -> String {
        (0x20..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard self.bytes.count - self.index >= expected.count,
            self.bytes[self.index..<self.index + expected.count].elementsEqual(expected)
        else { throw self.error("expected '\(literal)'") }
        self.index += expected.count
    }

    private mutating func enterContainer() throws(JSONParseError) {
        self.depth += 1
        if self.depth > Self.maximumDepth {
            throw self.error("nesting deeper than \(Self.maximumDepth) levels")
        }
        self.index += 1
    }

    /// Parses a value as ``parseValue()`` does, except that when it is an object, the values of its members named
    /// in `texts` are kept as their text (``JSONValue/text(_:)``), checked but not built.
    mutating func parseValue(keepingAsText texts: [String]) throws(JSONParseError) -> JSONValue {
        guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "{") else { return try self.parseValue() }
        return try self.parseObject(keepingAsText: texts)
    }

    private mutating func parseObject(keepingAsText texts: [String] = []) throws(JSONParseError) -> JSONValue {
        try self.enterContainer()
        defer { self.depth -= 1 }
        var members = JSONObject()
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
            self.index += 1
            return .object(members)
        }
        // Room for a call's few members at once, rather than growing the array one member at a time.
        members.reserveCapacity(4)
        try self.parseMembers { name, parser throws(JSONParseError) in
            let key = try parser.string(name)
            members[key] = texts.contains(key) ? .text(try parser.readText()) : try parser.parseValue()
        }
        return .object(members)
    }

    /// Reads past one value, checking it as ``parseValue()`` would, and keeps its text.
    mutating func readText() throws(JSONParseError) -> JSONText {
        JSONText(checked: self.bytes, try self.skipValue())
    }

    /// Reads past one value, checking it as ``parseValue()`` would but building nothing; returns where it lay.
    mutating func skipValue() throws(JSONParseError) -> Range<Int> {
        let start = self.index
        guard self.index < self.bytes.count else { throw self.error("unexpected end of input") }
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"):
            try self.enterContainer()
            defer { self.depth -= 1 }
            try self.parseMembers { _, parser throws(JSONParseError) in _ = try parser.skipValue() }
        case UInt8(ascii: "["):
            try self.enterContainer()
            defer { self.depth -= 1 }
            self.skipWhitespace()
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "]") {
                self.index += 1
                break
            }
            elements: while true {
                self.skipWhitespace()
                _ = try self.skipValue()
                self.skipWhitespace()
                guard self.index < self.bytes.count else { throw self.error("unexpected end of input in array") }
                switch self.bytes[self.index] {
                case UInt8(ascii: ","): self.index += 1
                case UInt8(ascii: "]"): self.index += 1; break elements
                default: throw self.error("expected ',' or ']' in array")
                }
            }
        case UInt8(ascii: "\""): try self.skipString()
        case UInt8(ascii: "t"): try self.expectLiteral("true")
        case UInt8(ascii: "f"): try self.expectLiteral("false")
        case UInt8(ascii: "n"): try self.expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let isInteger = try self.scanNumber()
            // Up to eighteen characters an integer always fits; anything else is converted, as parsing would, to
            // refuse what is out of range.
            if !isInteger || self.index - start > 18 { _ = try self.number(from: start, isInteger: isInteger) }
        default: throw self.error("unexpected character '\(Self.printable(self.bytes[self.index]))'")
        }
        return start..<self.index
    }

    /// Reads past a string, checking it as ``parseString()`` does; returns where its characters lie and how they
    /// are written.
    @discardableResult
    private mutating func skipString() throws(JSONParseError) -> JSONMemberName {
        self.index += 1  // opening quote
        let start = self.index
        var runStart = self.index
        var seen: UInt64 = 0
        var plain = true
        while true {
            self.index = Self.plainBytes(in: self.bytes, from: self.index, seen: &seen)
            guard self.index < self.bytes.count else { throw self.error("unterminated string") }
            if seen & Self.topBits != 0, !Self.isValidUTF8(UnsafeBufferPointer(rebasing: self.bytes[runStart..<self.index])) {
                throw JSONParseError(offset: runStart, reason: "string is not valid UTF-8")
            }
            switch self.bytes[self.index] {
            case UInt8(ascii: "\""):
                self.index += 1
                return JSONMemberName(characters: start..<self.index - 1, plainASCII: plain && seen & Self.topBits == 0)
            case UInt8(ascii: "\\"):
                self.index += 1
                _ = try self.parseEscape()
                runStart = self.index
                plain = false
                seen = 0
            default:
                throw self.error("control character in string")
            }
        }
    }

    /// Whether `bytes` are well-formed UTF-8, as `String(validating:)` judges, without making a string.
    private static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// Reads an object's members up to and including its closing brace; the opening brace is behind. `member`
    /// reads each value. Names are checked and handed over where they lie: a reader that only compares them with
    /// names it knows (a call's envelope) never makes them into strings.
    private mutating func parseMembers(
        _ member: (JSONMemberName, inout JSONParser) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
            self.index += 1
            return
        }
        while true {
            self.skipWhitespace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\"") else {
                throw self.error("expected a member name in quotes")
            }
            let key = try self.skipString()
            self.skipWhitespace()
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ":") else {
                throw self.error("expected ':' after member name")
            }
            self.index += 1
            self.skipWhitespace()
            try member(key, &self)
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error("unexpected end of input in object") }
            switch self.bytes[self.index] {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "}"): self.index += 1; return
            default: throw self.error("expected ',' or '}' in object")
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try self.enterContainer()
        defer { self.depth -= 1 }
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "]") {
            self.index += 1
            return .array(elements)
        }
        while true {
            self.skipWhitespace()
            elements.append(try self.parseValue())
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error("unexpected end of input in array") }
            switch self.bytes[self.index] {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "]"): self.index += 1; return .array(elements)
            default: throw self.error("expected ',' or ']' in array")
            }
        }
    }

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

    private mutating func parseString() throws(JSONParseError) -> String {
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
    private static let smallString = 15

    /// A string of at most ``smallString`` ASCII bytes, made without the UTF-8 check and repair pass that
    /// `String(decoding:)` makes.
    private static func smallASCIIString(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(bytes))
            return bytes.count
        }
    }

    private static let topBits: UInt64 = 0x8080_8080_8080_8080
    private static let lowBits: UInt64 = 0x0101_0101_0101_0101

    /// The index of the first byte from `start` that ends a run of plain string bytes (a quote, a backslash or a
    /// control character), or the end; the run's bytes are ORed into `seen`. Sixteen bytes are tested at a time
    /// with vector compares, and the last few eight at a time with bit tricks: a payload's long strings are most of
    /// what a post carries, and a byte at a time cost about twenty instructions each.
    @inline(__always)
    private static func plainBytes(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, seen: inout UInt64) -> Int {
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
    private static func bytesBefore(_ flags: UInt64, in word: UInt64, seen: inout UInt64) -> Int {
        let plain = flags.trailingZeroBitCount / 8
        seen |= word & ((1 &<< UInt64(plain * 8)) &- 1)
        return plain
    }

    private mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
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

    private mutating func parseHex4() throws(JSONParseError) -> UInt16 {
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

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = self.index
        let isInteger = try self.scanNumber()
        return try self.number(from: start, isInteger: isInteger)
    }

    /// Reads past a number's text, checking its grammar; returns whether it is an integer (no fraction, no
    /// exponent).
    private mutating func scanNumber() throws(JSONParseError) -> Bool {
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
    private func number(from start: Int, isInteger: Bool) throws(JSONParseError) -> JSONValue {
        let text = String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]), as: UTF8.self)
        if isInteger, let value = Int64(text) {
            return .int(value)
        }
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(offset: start, reason: "number out of range")
        }
        return .double(value)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func skipDigits() {
        while self.index < self.bytes.count, Self.isDigit(self.bytes[self.index]) { self.index += 1 }
    }
}
