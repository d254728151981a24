/// An interface definition in the Varlink interface language, as a service serves it from
/// `GetInterfaceDescription`, read in full: its name, and the types of its methods' parameters and of the types it
/// defines, against which a server checks every call (``VarlinkType/mismatch(_:definitions:)``).
public struct VarlinkInterfaceDescription: Sendable, Hashable {
    /// The interface name, such as `org.example.ftp`.
    public let name: String
    /// The text as written, comments included: they are the interface's documentation.
    public let text: String
    public let methods: Set<String>
    public let errors: Set<String>
    public let types: Set<String>
    /// Each method's input parameters, as declared.
    public let parameters: [String: [VarlinkField]]
    /// Each type the interface defines (`type Name (...)`), by name.
    public let definitions: [String: VarlinkType]

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

    /// Reads `text`.
    /// - Throws: ``ParseError`` when the text does not follow the interface grammar (varlink.org), declares a name
    ///   twice, or uses a type it does not define.
    public init(text: String) throws(ParseError) {
        var reader = VarlinkInterfaceReader(text)
        let declarations = try reader.read()
        self.name = declarations.name
        self.text = text
        self.methods = Set(declarations.parameters.keys)
        self.errors = declarations.errors
        self.types = Set(declarations.definitions.keys)
        self.parameters = declarations.parameters
        self.definitions = declarations.definitions
    }

    /// Checks a call's parameters against what `method` declares.
    /// - Returns: the first mismatch, or `nil` when they fit (or the interface does not declare the method).
    public func mismatch(inParametersOf method: String, _ parameters: JSONObject) -> VarlinkTypeMismatch? {
        guard let fields = self.parameters[method] else { return nil }
        return VarlinkType.mismatch(parameters, fields: fields, definitions: self.definitions)
    }
}

/// A reader of the interface language: a recursive descent over the text's bytes, skipping white space and
/// comments between tokens.
struct VarlinkInterfaceReader {
    struct Declarations {
        var name: String
        var parameters: [String: [VarlinkField]] = [:]
        var errors: Set<String> = []
        var definitions: [String: VarlinkType] = [:]
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1

    init(_ text: String) {
        self.bytes = Array(text.utf8)
    }

    mutating func read() throws(VarlinkInterfaceDescription.ParseError) -> Declarations {
        self.skipSpace()
        guard self.index < self.bytes.count else {
            throw VarlinkInterfaceDescription.ParseError(line: 1, reason: "no 'interface' line")
        }
        guard self.word() == "interface" else { throw self.fail("expected one 'interface' line with a valid name") }
        self.skipSpace()
        let name = self.word(allowing: [UInt8(ascii: "."), UInt8(ascii: "-")])
        guard VarlinkNames.isValidInterface(name) else {
            throw self.fail("expected one 'interface' line with a valid name")
        }
        var declarations = Declarations(name: name)
        var declared: Set<String> = []
        var used: [(name: String, line: Int)] = []
        while true {
            self.skipSpace()
            guard self.index < self.bytes.count else { break }
            let keyword = self.word()
            guard ["method", "error", "type"].contains(keyword) else {
                if keyword == "interface" { throw self.fail("expected one 'interface' line with a valid name") }
                throw self.fail("expected method, type or error, got '\(keyword.isEmpty ? self.current : keyword)'")
            }
            self.skipSpace()
            let member = self.word()
            guard VarlinkNames.isValidMemberName(Substring(member)) else {
                throw self.fail("'\(keyword)' needs a name starting upper-case")
            }
            guard declared.insert(member).inserted else { throw self.fail("'\(member)' is declared twice") }
            switch keyword {
            case "method":
                let input = try self.structure(using: &used)
                self.skipSpace()
                guard self.take("->") else { throw self.fail("expected '->' after the parameters of \(member)") }
                _ = try self.structure(using: &used)
                declarations.parameters[member] = input
            case "error":
                _ = try self.structure(using: &used)
                declarations.errors.insert(member)
            default:
                declarations.definitions[member] = try self.structureOrEnumeration(using: &used)
            }
        }
        for use in used where declarations.definitions[use.name] == nil {
            throw VarlinkInterfaceDescription.ParseError(line: use.line, reason: "type \(use.name) is not defined")
        }
        return declarations
    }

    /// `( field: type, ... )`.
    private mutating func structure(
        using used: inout [(name: String, line: Int)]
    ) throws(VarlinkInterfaceDescription.ParseError) -> [VarlinkField] {
        guard case .structure(let fields) = try self.structureOrEnumeration(using: &used, allowEnumeration: false) else {
            return []
        }
        return fields
    }

    /// `( field: type, ... )` or `( name, ... )`.
    private mutating func structureOrEnumeration(
        using used: inout [(name: String, line: Int)],
        allowEnumeration: Bool = true
    ) throws(VarlinkInterfaceDescription.ParseError) -> VarlinkType {
        self.skipSpace()
        guard self.take("(") else { throw self.fail("expected '('") }
        var fields: [VarlinkField] = []
        var names: [String] = []
        while true {
            self.skipSpace()
            if self.take(")") { break }
            if !fields.isEmpty || !names.isEmpty {
                guard self.take(",") else { throw self.fail("expected ',' or ')'") }
                self.skipSpace()
            }
            let field = self.word(allowing: [UInt8(ascii: "_")])
            guard let first = field.utf8.first, Self.isLetter(first) else { throw self.fail("expected a field name") }
            self.skipSpace()
            if self.take(":") {
                guard names.isEmpty else { throw self.fail("an enumeration's values have no types") }
                guard !fields.contains(where: { $0.name == field }) else {
                    throw self.fail("field '\(field)' is declared twice")
                }
                fields.append(VarlinkField(field, try self.type(using: &used)))
            } else {
                guard allowEnumeration, fields.isEmpty else { throw self.fail("expected ':' after '\(field)'") }
                names.append(field)
            }
        }
        return names.isEmpty ? .structure(fields) : .enumeration(names)
    }

    private mutating func type(
        using used: inout [(name: String, line: Int)]
    ) throws(VarlinkInterfaceDescription.ParseError) -> VarlinkType {
        self.skipSpace()
        if self.take("?") {
            let wrapped = try self.type(using: &used)
            if case .optional = wrapped { throw self.fail("'?' twice") }
            return .optional(wrapped)
        }
        if self.take("[]") { return .array(try self.type(using: &used)) }
        if self.take("[string]") { return .dictionary(try self.type(using: &used)) }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "(") {
            return try self.structureOrEnumeration(using: &used)
        }
        let name = self.word()
        switch name {
        case "bool": return .bool
        case "int": return .int
        case "float": return .float
        case "string": return .string
        case "object": return .object
        case "any": return .any
        default:
            guard VarlinkNames.isValidMemberName(Substring(name)) else {
                throw self.fail("expected a type, got '\(name.isEmpty ? self.current : name)'")
            }
            used.append((name, self.line))
            return .named(name)
        }
    }

    // MARK: Tokens

    /// White space, line ends and `#` comments.
    private mutating func skipSpace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case UInt8(ascii: "\n"):
                self.line += 1
                self.index += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                self.index += 1
            case UInt8(ascii: "#"):
                while self.index < self.bytes.count, self.bytes[self.index] != UInt8(ascii: "\n") { self.index += 1 }
            default:
                return
            }
        }
    }

    /// Letters, digits and the bytes `allowing`, from here.
    private mutating func word(allowing extra: [UInt8] = []) -> String {
        let start = self.index
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            guard Self.isLetter(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || extra.contains(byte)
            else { break }
            self.index += 1
        }
        return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
    }

    private mutating func take(_ token: String) -> Bool {
        let token = Array(token.utf8)
        guard self.bytes.count - self.index >= token.count, Array(self.bytes[self.index..<(self.index + token.count)]) == token
        else { return false }
        self.index += token.count
        return true
    }

    /// The character here, for a message.
    private var current: String {
        self.index < self.bytes.count ? String(decoding: [self.bytes[self.index]], as: UTF8.self) : "the end"
    }

    private func fail(_ reason: String) -> VarlinkInterfaceDescription.ParseError {
        VarlinkInterfaceDescription.ParseError(line: self.line, reason: reason)
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }
}
