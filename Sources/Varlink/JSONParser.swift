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
    let bytes: UnsafeBufferPointer<UInt8>
    var index: Int = 0
    var depth: Int = 0
    /// Strings the input's sender repeats, when the caller keeps them.
    let strings: JSONStringCache?

    init(bytes: UnsafeBufferPointer<UInt8>, strings: JSONStringCache?) {
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

    func error(_ reason: String) -> JSONParseError {
        JSONParseError(offset: self.index, reason: reason)
    }

    mutating func skipWhitespace() {
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

    static func printable(_ byte: UInt8) -> String {
        (0x20..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard self.bytes.count - self.index >= expected.count,
            self.bytes[self.index..<self.index + expected.count].elementsEqual(expected)
        else { throw self.error("expected '\(literal)'") }
        self.index += expected.count
    }

    mutating func enterContainer() throws(JSONParseError) {
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

    mutating func parseObject(keepingAsText texts: [String] = []) throws(JSONParseError) -> JSONValue {
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
    mutating func skipString() throws(JSONParseError) -> JSONMemberName {
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
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
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
    mutating func parseMembers(
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

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
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

}
