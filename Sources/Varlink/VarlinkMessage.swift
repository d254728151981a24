/// A method call as a client sends it.
public struct VarlinkCall: Sendable, Hashable {
    /// Fully qualified method name: `interface.Method`.
    public var method: String
    public var parameters: [String: JSONValue]
    /// The client wants no reply.
    public var oneway: Bool
    /// The client accepts several replies, the last without `continues`.
    public var more: Bool
    /// The client asks to leave Varlink and talk another protocol on this connection.
    public var upgrade: Bool

    public init(
        method: String,
        parameters: [String: JSONValue] = [:],
        oneway: Bool = false,
        more: Bool = false,
        upgrade: Bool = false
    ) {
        self.method = method
        self.parameters = parameters
        self.oneway = oneway
        self.more = more
        self.upgrade = upgrade
    }

    /// The interface part of ``method``: everything before the last dot.
    public var interface: String {
        guard let dot = self.method.lastIndex(of: ".") else { return "" }
        return String(self.method[..<dot])
    }

    /// The method's own name: everything after the last dot.
    public var methodName: String {
        guard let dot = self.method.lastIndex(of: ".") else { return self.method }
        return String(self.method[self.method.index(after: dot)...])
    }

    /// Reads a call from a decoded message.
    /// - Throws: ``VarlinkProtocolError/invalidMessage(_:)`` naming what is missing or malformed.
    public init(message: JSONValue) throws(VarlinkProtocolError) {
        guard let object = message.objectValue else {
            throw .invalidMessage("a call must be a JSON object")
        }
        guard let method = object["method"]?.stringValue else {
            throw .invalidMessage("a call needs a string member 'method'")
        }
        guard VarlinkNames.isValidQualifiedMethod(method) else {
            throw .invalidMessage("'\(method)' is not an interface-qualified method name")
        }
        var parameters: [String: JSONValue] = [:]
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let members)?: parameters = members
        default: throw .invalidMessage("'parameters' must be an object")
        }
        func flag(_ name: String) throws(VarlinkProtocolError) -> Bool {
            switch object[name] {
            case nil, .null?: return false
            case .bool(let value)?: return value
            default: throw .invalidMessage("'\(name)' must be a boolean")
            }
        }
        self.init(
            method: method,
            parameters: parameters,
            oneway: try flag("oneway"),
            more: try flag("more"),
            upgrade: try flag("upgrade")
        )
    }

    /// The call as a JSON message.
    public var message: JSONValue {
        var object: [String: JSONValue] = ["method": .string(self.method)]
        if !self.parameters.isEmpty { object["parameters"] = .object(self.parameters) }
        if self.oneway { object["oneway"] = true }
        if self.more { object["more"] = true }
        if self.upgrade { object["upgrade"] = true }
        return .object(object)
    }
}

/// A reply as a server sends it: either parameters, or an error with parameters.
public struct VarlinkReply: Sendable, Hashable {
    public var parameters: [String: JSONValue]
    /// Set on every reply of a streamed call but the last.
    public var continues: Bool
    /// The fully qualified error name, when the call failed.
    public var error: String?

    public init(parameters: [String: JSONValue] = [:], continues: Bool = false, error: String? = nil) {
        self.parameters = parameters
        self.continues = continues
        self.error = error
    }

    /// An error reply for any error that knows its Varlink form.
    public init(error: any VarlinkErrorConvertible) {
        self.init(parameters: error.varlinkParameters, error: error.varlinkName)
    }

    /// Reads a reply from a decoded message.
    public init(message: JSONValue) throws(VarlinkProtocolError) {
        guard let object = message.objectValue else {
            throw .invalidMessage("a reply must be a JSON object")
        }
        var parameters: [String: JSONValue] = [:]
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let members)?: parameters = members
        default: throw .invalidMessage("'parameters' must be an object")
        }
        var error: String?
        switch object["error"] {
        case nil, .null?: break
        case .string(let name)?: error = name
        default: throw .invalidMessage("'error' must be a string")
        }
        self.init(parameters: parameters, continues: object["continues"]?.boolValue ?? false, error: error)
    }

    /// Appends the reply's frame: its compact JSON text (the same bytes as ``message`` gives) and the closing NUL.
    /// Written straight from the fields, since every call's reply passes here.
    public func writeFrame(to output: inout [UInt8]) {
        // Members in sorted order, as JSONValue writes an object.
        output.append(UInt8(ascii: "{"))
        if self.continues { output.append(contentsOf: #""continues":true,"#.utf8) }
        if let error = self.error {
            output.append(contentsOf: #""error":"#.utf8)
            JSONValue.string(error).write(to: &output)
            output.append(UInt8(ascii: ","))
        }
        output.append(contentsOf: #""parameters":"#.utf8)
        JSONValue.object(self.parameters).write(to: &output)
        output.append(contentsOf: [UInt8(ascii: "}"), 0])
    }

    /// The reply as a JSON message.
    public var message: JSONValue {
        var object: [String: JSONValue] = ["parameters": .object(self.parameters)]
        if self.continues { object["continues"] = true }
        if let error = self.error { object["error"] = .string(error) }
        return .object(object)
    }
}

/// Naming rules from the Varlink specification.
public enum VarlinkNames {
    /// An interface name is reverse-domain: at least two dot-separated labels of ASCII letters, digits and dashes,
    /// none starting or ending with a dash, the first starting with a letter (varlink.org's grammar).
    public static func isValidInterface(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { Self.isValidInterface($0) }
    }

    /// One pass over the bytes, without splitting: every call's method name is checked.
    private static func isValidInterface(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let initial = bytes.first, isLetter(initial) else { return false }
        var labels = 1
        var labelEmpty = true
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                guard !labelEmpty, previous != UInt8(ascii: "-") else { return false }
                labels += 1
                labelEmpty = true
            } else {
                guard isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "-") else { return false }
                guard !(labelEmpty && byte == UInt8(ascii: "-")) else { return false }
                labelEmpty = false
            }
            previous = byte
        }
        return labels >= 2 && !labelEmpty && previous != UInt8(ascii: "-")
    }

    /// A member (method, type, error) name starts with an upper-case ASCII letter and has letters and digits.
    public static func isValidMemberName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// `interface.Method`.
    public static func isValidQualifiedMethod(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")) else { return false }
            let member = UnsafeBufferPointer(rebasing: bytes[(dot + 1)...])
            guard let first = member.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z"),
                member.allSatisfy({ isLetter($0) || isDigit($0) })
            else { return false }
            return Self.isValidInterface(UnsafeBufferPointer(rebasing: bytes[..<dot]))
        }
    }
}
