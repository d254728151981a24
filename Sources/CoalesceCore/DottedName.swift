/// The label grammar app names and event kinds share: labels separated by dots, each of lower-case ASCII letters,
/// digits, `-` and `_`, starting with a letter or digit. Checked in one pass over the bytes, since every post
/// checks two such names.
enum DottedName {
    enum Problem: Error {
        case emptyLabel
        case badStart
        case badCharacter
    }

    /// The number of labels, or what is wrong first.
    static func labels(of value: String) -> Result<Int, Problem> {
        var value = value
        return value.withUTF8 { bytes in
            var labels = 1
            var atStart = true
            for byte in bytes {
                if byte == UInt8(ascii: ".") {
                    if atStart { return .failure(.emptyLabel) }
                    labels += 1
                    atStart = true
                } else if atStart {
                    guard isLetterOrDigit(byte) else { return .failure(.badStart) }
                    atStart = false
                } else {
                    guard isLetterOrDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") else {
                        return .failure(.badCharacter)
                    }
                }
            }
            return atStart ? .failure(.emptyLabel) : .success(labels)
        }
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }
}
