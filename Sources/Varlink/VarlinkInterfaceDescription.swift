/// An interface definition in the Varlink interface language, as a service serves it from
/// `GetInterfaceDescription`, with the names declared in it.
///
/// Only the declarations' names are read here (that is what a server needs to route calls and to check that it
/// implements what it declares); clients such as Python's `varlink` parse the full grammar from the same text.
public struct VarlinkInterfaceDescription: Sendable, Hashable {
    /// The interface name, such as `org.example.ftp`.
    public let name: String
    /// The text as written, comments included: they are the interface's documentation.
    public let text: String
    public let methods: Set<String>
    public let errors: Set<String>
    public let types: Set<String>

    /// Why an interface text cannot be used.
    public struct ParseError: Error, Hashable, CustomStringConvertible {
        public var line: Int
        public var reason: String

        public init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }

        public var description: String { "line \(self.line): \(self.reason)" }
    }

    /// Reads the declarations of `text`.
    /// - Throws: ``ParseError`` when the text does not start with an `interface` line or declares a name twice.
    public init(text: String) throws(ParseError) {
        var name: String?
        var methods: Set<String> = []
        var errors: Set<String> = []
        var types: Set<String> = []
        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.prefix { $0 != "#" }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "(" })
            guard let keyword = words.first else { continue }
            let lineNumber = offset + 1
            switch keyword {
            case "interface":
                guard name == nil, words.count >= 2, VarlinkNames.isValidInterface(String(words[1])) else {
                    throw ParseError(line: lineNumber, reason: "expected one 'interface' line with a valid name")
                }
                name = String(words[1])
            case "method", "error", "type":
                guard name != nil else {
                    throw ParseError(line: lineNumber, reason: "'\(keyword)' before the 'interface' line")
                }
                guard words.count >= 2, VarlinkNames.isValidMemberName(words[1]) else {
                    throw ParseError(line: lineNumber, reason: "'\(keyword)' needs a name starting upper-case")
                }
                let member = String(words[1])
                guard !methods.contains(member), !errors.contains(member), !types.contains(member) else {
                    throw ParseError(line: lineNumber, reason: "'\(member)' is declared twice")
                }
                switch keyword {
                case "method": methods.insert(member)
                case "error": errors.insert(member)
                default: types.insert(member)
                }
            default:
                continue  // continuation lines of a declaration
            }
        }
        guard let name else { throw ParseError(line: 1, reason: "no 'interface' line") }
        self.name = name
        self.text = text
        self.methods = methods
        self.errors = errors
        self.types = types
    }
}
