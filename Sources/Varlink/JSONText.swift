/// A JSON value kept as the text it came in, checked but not built: for a value the receiver passes on rather than
/// reads (an event's payload goes from the poster to the store and to the app as it was sent).
///
/// Building a payload into values and writing it out again cost more than anything else a post does; kept as text it
/// is one copy of its bytes. Whoever does need its members gets them from ``value``, parsed then.
// Unchecked: the bytes are written once, when it is made, and only read after.
public struct JSONText: @unchecked Sendable {
    /// The bytes, in one allocation of our own: a `[UInt8]` made from a buffer went through the standard library's
    /// unspecialized paths, several hundred instructions for each payload.
    private let storage: Storage

    private final class Storage: ManagedBuffer<Int, UInt8> {}  // header: the byte count

    /// Text already checked by the parser: the bytes of `input` in `range`, copied.
    init(checked input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        let made = Storage.create(minimumCapacity: range.count) { _ in range.count }
        self.storage = unsafeDowncast(made, to: Storage.self)
        self.storage.withUnsafeMutablePointerToElements { bytes in
            bytes.initialize(from: input.baseAddress! + range.lowerBound, count: range.count)
        }
    }

    /// Checks `utf8` as the parser does: one JSON value, white space around it allowed.
    /// - Throws: ``JSONParseError`` naming where the text went wrong.
    public init(validating utf8: [UInt8]) throws(JSONParseError) {
        _ = try JSONParser.parse(utf8)
        self = utf8.withUnsafeBufferPointer { JSONText(checked: $0, 0..<$0.count) }
    }

    /// The number of bytes of the text.
    // Through the pointer: `header` is a class's stored property, checked for exclusive access at run time.
    public var count: Int { self.storage.withUnsafeMutablePointerToHeader { $0.pointee } }

    /// Calls `body` with the text: valid JSON (RFC 8259) as sent, perhaps with white space between its tokens.
    public func withUTF8<T>(_ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        try self.storage.withUnsafeMutablePointerToElements { bytes in
            try body(UnsafeBufferPointer(start: bytes, count: self.count))
        }
    }

    /// The text's bytes.
    public var utf8: [UInt8] { self.withUTF8 { Array($0) } }

    /// The value the text stands for.
    public var value: JSONValue {
        // Every JSONText was checked by the same parser when it was made.
        guard let value = self.withUTF8({ try? JSONParser.parse($0) }) else {
            preconditionFailure("JSONText holds text the parser refuses")
        }
        return value
    }

    /// Whether the text is an object (it starts with a brace once any white space is behind).
    public var isObject: Bool {
        self.withUTF8 { bytes in bytes.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 } == UInt8(ascii: "{") }
    }

    /// Whether both hold the same bytes.
    func sameText(as other: JSONText) -> Bool {
        self.storage === other.storage || self.withUTF8 { mine in other.withUTF8 { theirs in mine.elementsEqual(theirs) } }
    }
}
