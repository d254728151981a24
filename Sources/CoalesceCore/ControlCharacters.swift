/// Control characters in the strings clients send. A string that becomes a key or a name (a notification's id, a
/// watch's name, a unit) takes none: SQLite binds text up to its first NUL, the environment and D-Bus cannot carry
/// one, and the others make names that print as something else. Free text (a title, a body) takes any but NUL.
public enum ControlCharacters {
    /// The first control character (U+0000 to U+001F, U+007F) in `text`, as its byte; `nil` when there is none.
    public static func first(in text: String) -> UInt8? {
        text.utf8.first { $0 < 0x20 || $0 == 0x7f }
    }

    /// Whether `text` holds a NUL.
    public static func hasNUL(_ text: String) -> Bool {
        text.utf8.contains(0)
    }

    /// "U+0000 (NUL)", "U+000A (line feed)": a control character as a person reads it.
    public static func name(of byte: UInt8) -> String {
        let names: [UInt8: String] = [0x00: "NUL", 0x09: "tab", 0x0a: "line feed", 0x0d: "carriage return", 0x1b: "escape", 0x7f: "DEL"]
        let hex = String(byte, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: 4 - hex.count) + hex
        return names[byte].map { "\(code) (\($0))" } ?? code
    }

    /// Why `text`, named `field`, cannot be a key or a name; `nil` when it can.
    public static func problem(inName text: String, field: String) -> String? {
        guard let byte = first(in: text) else { return nil }
        return "\(field) contains the control character \(name(of: byte)); ids and names take none"
    }

    /// Why `text`, named `field`, cannot be kept as text; `nil` when it can.
    public static func problem(inText text: String, field: String) -> String? {
        guard hasNUL(text) else { return nil }
        return "\(field) contains U+0000 (NUL), which no text the daemon keeps or shows may hold"
    }
}
