/// A method call as a client sends it.
public struct VarlinkCall: Sendable, Hashable {
    /// Fully qualified method name: `interface.Method`.
    public var method: String
    public var parameters: JSONObject
    /// The client wants no reply.
    public var oneway: Bool
    /// The client accepts several replies, the last without `continues`.
    public var more: Bool
    /// The client asks to leave Varlink and talk another protocol on this connection.
    public var upgrade: Bool

    public init(
        method: String,
        parameters: JSONObject = [:],
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

    /// Reads a call from its JSON text, taking the envelope's members as they are parsed rather than through a
    /// dictionary: every call a server receives passes here.
    /// - Throws: ``VarlinkProtocolError/invalidMessage(_:)`` naming what is missing or malformed.
    /// - Parameters:
    ///   - strings: where strings the peer repeats (its method names, say) are kept between its calls.
    ///   - checkedMethod: a method name known to be well-formed (the one a connection's last call went to, which
    ///     its next calls mostly repeat): not checked again.
    ///   - keepingAsText: the parameters of a method (given its name) whose values are kept as their text
    ///     (``JSONValue/text(_:)``): those the method passes on rather than reads.
    public init<Bytes: Collection<UInt8>>(
        json: Bytes,
        strings: JSONStringCache? = nil,
        checkedMethod: String? = nil,
        keepingAsText: (String) -> [String] = { _ in [] }
    ) throws(VarlinkProtocolError) {
        var method: JSONValue?
        var parameters: JSONValue?
        var oneway: JSONValue?
        var more: JSONValue?
        var upgrade: JSONValue?
        let isObject: Bool
        do {
            isObject = try JSONParser.readMembers(json, strings: strings) { name, parser throws(JSONParseError) in
                if parser.name(name, is: "method") {
                    method = try parser.parseValue()
                } else if parser.name(name, is: "parameters") {
                    // The method comes first in what our clients and most others send; where it comes later, the
                    // parameters are checked now and read once it is known.
                    guard let name = method?.stringValue else {
                        parameters = .text(try parser.readText())
                        return
                    }
                    parameters = try parser.parseValue(keepingAsText: keepingAsText(name))
                } else if parser.name(name, is: "oneway") {
                    oneway = try parser.parseValue()
                } else if parser.name(name, is: "more") {
                    more = try parser.parseValue()
                } else if parser.name(name, is: "upgrade") {
                    upgrade = try parser.parseValue()
                } else {
                    _ = try parser.skipValue()
                }
            }
            if case .text(let text)? = parameters, let name = method?.stringValue {
                let texts = keepingAsText(name)
                let reread = text.withUTF8 { bytes in
                    Result { () throws(JSONParseError) in
                        try JSONParser.parseWhole(bytes) { parser throws(JSONParseError) in try parser.parseValue(keepingAsText: texts) }
                    }
                }
                parameters = try reread.get()
            }
        } catch {
            throw .invalidMessage(error.description)
        }
        guard isObject else { throw .invalidMessage("a call must be a JSON object") }
        try self.init(
            method: method, parameters: parameters, oneway: oneway, more: more, upgrade: upgrade, checkedMethod: checkedMethod
        )
    }

    private init(
        method: JSONValue?,
        parameters: JSONValue?,
        oneway: JSONValue?,
        more: JSONValue?,
        upgrade: JSONValue?,
        checkedMethod: String? = nil
    ) throws(VarlinkProtocolError) {
        guard let method = method?.stringValue else {
            throw .invalidMessage("a call needs a string member 'method'")
        }
        guard method == checkedMethod || VarlinkNames.isValidQualifiedMethod(method) else {
            throw .invalidMessage("'\(method)' is not an interface-qualified method name")
        }
        var members: JSONObject = [:]
        switch parameters {
        case nil, .null?: break
        case .object(let object)?: members = object
        default: throw .invalidMessage("'parameters' must be an object")
        }
        func flag(_ name: String, _ value: JSONValue?) throws(VarlinkProtocolError) -> Bool {
            switch value {
            case nil, .null?: return false
            case .bool(let value)?: return value
            default: throw .invalidMessage("'\(name)' must be a boolean")
            }
        }
        self.init(
            method: method,
            parameters: members,
            oneway: try flag("oneway", oneway),
            more: try flag("more", more),
            upgrade: try flag("upgrade", upgrade)
        )
    }

    /// The call as a JSON message.
    public var message: JSONValue {
        var object: JSONObject = ["method": .string(self.method)]
        if !self.parameters.isEmpty { object["parameters"] = .object(self.parameters) }
        if self.oneway { object["oneway"] = true }
        if self.more { object["more"] = true }
        if self.upgrade { object["upgrade"] = true }
        return .object(object)
    }
}

/// A reply as a server sends it: either parameters, or an error with parameters.
public struct VarlinkReply: Sendable, Hashable {
    public var parameters: JSONObject {
        didSet { self.encodedParameters = nil }
    }
    /// The frame of this reply without `continues` or `error`, when its parameters were written once for many
    /// replies (``VarlinkEncodedParameters``): the parameters' text is the frame less its first
    /// ``VarlinkEncodedParameters/prefix`` bytes and its last two.
    private var encodedParameters: [UInt8]?
    /// Set on every reply of a streamed call but the last.
    public var continues: Bool
    /// The fully qualified error name, when the call failed.
    public var error: String?

    public init(parameters: JSONObject = [:], continues: Bool = false, error: String? = nil) {
        self.parameters = parameters
        self.continues = continues
        self.error = error
    }

    // How the parameters are held is no part of what the reply says.
    public static func == (lhs: VarlinkReply, rhs: VarlinkReply) -> Bool {
        lhs.parameters == rhs.parameters && lhs.continues == rhs.continues && lhs.error == rhs.error
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.parameters)
        hasher.combine(self.continues)
        hasher.combine(self.error)
    }

    /// A reply whose parameters were written out once, ahead of time.
    public init(_ parameters: VarlinkEncodedParameters) {
        self.init(parameters: parameters.parameters)
        self.encodedParameters = parameters.frame
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
        var parameters: JSONObject = [:]
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
        if let frame = self.encodedParameters, !self.continues, self.error == nil {
            output.append(contentsOf: frame)
            return
        }
        // Members in sorted order, as JSONValue writes an object.
        output.append(UInt8(ascii: "{"))
        if self.continues { output.append(contentsOf: #""continues":true,"#.utf8) }
        if let error = self.error {
            output.append(contentsOf: #""error":"#.utf8)
            JSONValue.string(error).write(to: &output)
            output.append(UInt8(ascii: ","))
        }
        output.append(contentsOf: #""parameters":"#.utf8)
        if let frame = self.encodedParameters {
            output.append(contentsOf: frame[VarlinkEncodedParameters.prefix..<(frame.count - 2)])
        } else {
            JSONValue.object(self.parameters).write(to: &output)
        }
        output.append(contentsOf: [UInt8(ascii: "}"), 0])
    }

    /// The reply as a JSON message.
    public var message: JSONValue {
        var object: JSONObject = ["parameters": .object(self.parameters)]
        if self.continues { object["continues"] = true }
        if let error = self.error { object["error"] = .string(error) }
        return .object(object)
    }
}

/// A reply's parameters written out once, for a reply a method gives again and again (a post's "sent to one app"):
/// sending it costs a copy of its bytes, not a dictionary built and serialized per call.
public struct VarlinkEncodedParameters: Sendable, Hashable {
    public let parameters: JSONObject
    /// The whole frame of a reply of these parameters (`{"parameters":...}` and its NUL): most replies are
    /// written with one copy.
    let frame: [UInt8]
    /// What comes before the parameters in ``frame``.
    static let prefix = #"{"parameters":"#.utf8.count

    public init(_ parameters: JSONObject) {
        self.parameters = parameters
        var frame = Array(#"{"parameters":"#.utf8)
        JSONValue.object(parameters).write(to: &frame)
        frame.append(contentsOf: [UInt8(ascii: "}"), 0])
        self.frame = frame
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
