extension JSONValue {
    /// Appends the compact JSON text of this value to `output`; object members are written in sorted order so that
    /// the same value always gives the same bytes. A value held as its text is written as it came.
    public func write(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): output.append(contentsOf: String(value).utf8)
        case .double(let value):
            // JSON has no NaN or infinity; null is what JSON.stringify writes for them too.
            output.append(contentsOf: (value.isFinite ? "\(value)" : "null").utf8)
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                element.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            var first = true
            members.forEachByKey { key, value in
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                Self.writeString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        case .text(let text):
            // As sent: valid JSON already, its white space between tokens harmless where it goes.
            text.withUTF8 { output.append(contentsOf: $0) }
        }
    }

    /// The compact JSON text of this value.
    public var jsonText: String {
        var bytes: [UInt8] = []
        self.write(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The JSON text indented by two spaces a level, for people.
    public func prettyText(indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .array(let elements) where !elements.isEmpty:
            let lines = elements.map { inner + $0.prettyText(indent: inner) }
            return "[\n" + lines.joined(separator: ",\n") + "\n" + indent + "]"
        case .text(let text):
            return text.value.prettyText(indent: indent)
        case .object(let members) where !members.isEmpty:
            var lines: [String] = []
            members.forEachByKey { key, value in
                lines.append(inner + JSONValue.string(key).jsonText + ": " + value.prettyText(indent: inner))
            }
            return "{\n" + lines.joined(separator: ",\n") + "\n" + indent + "}"
        default:
            return self.jsonText
        }
    }

    private static func writeString(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them whole, from their contiguous UTF-8.
        var value = value
        let plain = value.withUTF8 { bytes in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            output.append(contentsOf: bytes)
            return true
        }
        if plain {
            output.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
            case 0x0A: output.append(contentsOf: #"\n"#.utf8)
            case 0x0D: output.append(contentsOf: #"\r"#.utf8)
            case 0x09: output.append(contentsOf: #"\t"#.utf8)
            case 0x00..<0x20:
                let hex = String(byte, radix: 16)
                output.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
