/// A JSON value kept as the text it came in, checked but not built: for a value the receiver passes on rather than
/// reads (an event's payload goes from the poster to the store and to the app as it was sent).
///
/// Building a payload into values and writing it out again cost more than anything else a post does; kept as text it
/// is one copy of its bytes. Whoever does need its members gets them from ``value``, parsed then.
public struct JSONText: Sendable {
    /// The text, as sent: valid JSON (RFC 8259), perhaps with white space between its tokens.
    public let utf8: [UInt8]

    /// Text already checked by the parser: the bytes of `input` in `range`, copied.
    init(checked input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        self.utf8 = Array(UnsafeBufferPointer(rebasing: input[range]))
    }

    /// Checks `utf8` as the parser does: one JSON value, white space around it allowed.
    /// - Throws: ``JSONParseError`` naming where the text went wrong.
    public init(validating utf8: [UInt8]) throws(JSONParseError) {
        _ = try JSONParser.parse(utf8)
        self.utf8 = utf8
    }

    /// The value the text stands for.
    public var value: JSONValue {
        do {
            return try JSONParser.parse(self.utf8)
        } catch {
            // Every JSONText was checked by the same parser when it was made.
            preconditionFailure("JSONText holds text the parser refuses: \(error)")
        }
    }

    /// Whether the text is an object (it starts with a brace once any white space is behind).
    public var isObject: Bool {
        self.utf8.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 } == UInt8(ascii: "{")
    }
}
