/// A type of the Varlink interface language, as an interface file declares a field or a parameter.
public indirect enum VarlinkType: Sendable, Hashable {
    case bool
    /// A JSON number without fraction or exponent.
    case int
    /// Any JSON number.
    case float
    case string
    /// Any JSON object.
    case object
    /// Any JSON value but null.
    case any
    /// A type the interface defines with `type Name (...)`.
    case named(String)
    /// A string that is one of these names.
    case enumeration([String])
    /// An object with these fields.
    case structure([VarlinkField])
    /// `[]T`.
    case array(VarlinkType)
    /// `[string]T`: an object whose every member is a `T`.
    case dictionary(VarlinkType)
    /// `?T`: a `T`, null, or (as a field) absent.
    case optional(VarlinkType)
}

/// A field of a structure, or a parameter of a method.
public struct VarlinkField: Sendable, Hashable {
    public var name: String
    public var type: VarlinkType

    public init(_ name: String, _ type: VarlinkType) {
        self.name = name
        self.type = type
    }
}

/// Why a value is not of its declared type: where in it (``path``, such as `posters.anyone` or `uids[2]`, empty
/// for the value itself) and what was expected of what was found.
public struct VarlinkTypeMismatch: Error, Hashable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { self.path.isEmpty ? self.reason : "\(self.path): \(self.reason)" }

    /// The path of the member named `member` of the value at `parent`: `parent.member`, or `parent["member"]` when
    /// the name has characters a path uses (a dot) or may not show.
    public static func path(_ parent: String, member: String) -> String {
        let step = VarlinkType.step(member)
        return parent.isEmpty || step.hasPrefix("[") ? parent + step : parent + "." + step
    }

    /// The same mismatch, seen from the value that holds this one under `step` (a member name, or `[n]`).
    func within(_ step: String) -> VarlinkTypeMismatch {
        guard !self.path.isEmpty else { return VarlinkTypeMismatch(path: step, reason: self.reason) }
        let separator = self.path.hasPrefix("[") ? "" : "."
        return VarlinkTypeMismatch(path: step + separator + self.path, reason: self.reason)
    }
}

extension VarlinkType {
    /// Checks `value` against this type, the way the Varlink specification maps its types to JSON. Members of an
    /// object that the structure does not declare are left alone: a newer client may send fields this side does not
    /// know yet. Named types are looked up in `definitions` (a name defined nowhere matches nothing).
    /// - Returns: the first mismatch, or `nil` when the value is of the type. Nothing is built on the way unless
    ///   there is a mismatch to describe.
    public func mismatch(_ value: JSONValue, definitions: [String: VarlinkType]) -> VarlinkTypeMismatch? {
        self.mismatch(value, definitions: definitions, depth: 0)
    }

    /// Named types may refer to themselves; a value nested this deep is refused rather than followed (the JSON
    /// parser already stops at 128 levels).
    private static let maximumDepth = 256

    private func mismatch(_ value: JSONValue, definitions: [String: VarlinkType], depth: Int) -> VarlinkTypeMismatch? {
        guard depth < Self.maximumDepth else { return VarlinkTypeMismatch(path: "", reason: "nested too deeply") }
        // An object kept as its text (a parameter the method passes on) is one without being read.
        if case .object = self { return value.isObject ? nil : self.expected(value) }
        // Any other value kept as text is read now that its type matters.
        if case .text(let text) = value { return self.mismatch(text.value, definitions: definitions, depth: depth + 1) }
        switch (self, value) {
        case (.optional, .null):
            return nil
        case (.optional(let wrapped), _):
            return wrapped.mismatch(value, definitions: definitions, depth: depth + 1)
        case (_, .null):
            return self.expected(value)
        case (.bool, .bool), (.int, .int), (.float, .int), (.float, .double), (.string, .string), (.any, _):
            return nil
        case (.named(let name), _):
            guard let definition = definitions[name] else {
                return VarlinkTypeMismatch(path: "", reason: "type \(name) is not defined")
            }
            guard let mismatch = definition.mismatch(value, definitions: definitions, depth: depth + 1) else { return nil }
            // A structure that is not an object at all is named as the type it is ("expected a Policy").
            if mismatch.path.isEmpty, case .structure = definition { return self.expected(value) }
            return mismatch
        case (.enumeration(let names), .string(let string)):
            guard names.contains(string) else {
                return VarlinkTypeMismatch(
                    path: "",
                    reason: "expected one of \(names.joined(separator: ", ")), got \(Self.quoted(string))"
                )
            }
            return nil
        case (.structure(let fields), .object(let members)):
            return Self.mismatch(members, fields: fields, definitions: definitions, depth: depth + 1)
        case (.array(let element), .array(let elements)):
            for (index, item) in elements.enumerated() {
                if let mismatch = element.mismatch(item, definitions: definitions, depth: depth + 1) {
                    return mismatch.within("[\(index)]")
                }
            }
            return nil
        case (.dictionary(let element), .object(let members)):
            for (key, item) in members {
                if let mismatch = element.mismatch(item, definitions: definitions, depth: depth + 1) {
                    return mismatch.within(Self.step(key))
                }
            }
            return nil
        default:
            return self.expected(value)
        }
    }

    /// Checks an object's members against the fields of a structure (a method's parameters are one): every
    /// non-optional field present and not null, every declared field of its type, undeclared members left alone.
    public static func mismatch(
        _ members: JSONObject,
        fields: [VarlinkField],
        definitions: [String: VarlinkType]
    ) -> VarlinkTypeMismatch? {
        Self.mismatch(members, fields: fields, definitions: definitions, depth: 0)
    }

    private static func mismatch(
        _ members: JSONObject,
        fields: [VarlinkField],
        definitions: [String: VarlinkType],
        depth: Int
    ) -> VarlinkTypeMismatch? {
        // By member, so that a call's few members are each matched once; required fields are counted on the way
        // and looked for by name only when one is missing.
        var requiredSeen = 0
        for (key, value) in members {
            let length = key.utf8.count
            guard let field = fields.first(where: { $0.name.utf8.count == length && $0.name == key }) else { continue }
            if let mismatch = field.type.mismatch(value, definitions: definitions, depth: depth + 1) {
                return mismatch.within(key)
            }
            if case .optional = field.type {} else { requiredSeen += 1 }
        }
        guard requiredSeen < fields.count else { return nil }
        for field in fields {
            if case .optional = field.type { continue }
            if members[field.name] == nil {
                return VarlinkTypeMismatch(path: field.name, reason: "missing; expected \(field.type.name)")
            }
        }
        return nil
    }

    private func expected(_ value: JSONValue) -> VarlinkTypeMismatch {
        VarlinkTypeMismatch(path: "", reason: "expected \(self.name), got \(Self.describe(value))")
    }

    /// The type in words, as a reason says it: "a bool", "an array of int", "a Policy object".
    public var name: String {
        switch self {
        case .bool: return "a bool"
        case .int: return "an int"
        case .float: return "a float"
        case .string: return "a string"
        case .object: return "an object"
        case .any: return "a value"
        case .named(let name): return "a \(name)"
        case .enumeration(let names): return "one of \(names.joined(separator: ", "))"
        case .structure: return "an object"
        case .array(let element): return "an array of \(element.bareName)"
        case .dictionary(let element): return "an object of \(element.bareName)"
        case .optional(let wrapped): return wrapped.name
        }
    }

    /// As ``name`` without the article, for the element of an array or a map.
    private var bareName: String {
        switch self {
        case .bool: return "bool"
        case .int: return "int"
        case .float: return "float"
        case .string: return "string"
        case .object, .structure: return "object"
        case .any: return "any"
        case .named(let name): return name
        case .enumeration, .array, .dictionary, .optional: return self.name
        }
    }

    /// What a JSON value is, as a reason says it.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool: return "a bool"
        case .int: return "an int"
        case .double(let number): return "a float (\(JSONValue.double(number).jsonText))"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        case .text(let text): return Self.describe(text.value)
        }
    }

    /// A string as JSON writes it, so that a control character or a quote in it shows as such.
    private static func quoted(_ string: String) -> String {
        JSONValue.string(string).jsonText
    }

    /// A member name as a step of a path.
    static func step(_ key: String) -> String {
        Self.isPlainName(key) ? key : "[\(Self.quoted(key))]"
    }

    /// A map key that a path can show as it is (`kinds.mail` rather than `kinds["mail"]`): letters, digits and
    /// underscores only, so that no dot or bracket in it is read as part of the path.
    private static func isPlainName(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.allSatisfy { byte in
            (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
    }
}

/// The check of one method's parameters against their declared types, prepared once for every call of it.
///
/// Every call passes here, a post among them, so the common case costs little: each member is read where it is
/// stored, matched to its field by length and name, and a field of a plain type (`string`, `int`, `float`, `bool`,
/// `object`, `any`, or one of them nullable) is checked by the value's case against the cases it accepts. Only a field
/// of another type (an array, a map, a named type) is checked the general way
/// (``VarlinkType/mismatch(_:definitions:)``), and only a call that does not fit is gone over again to say why
/// (``VarlinkType/mismatch(_:fields:definitions:)``).
public struct VarlinkParameterCheck: Sendable {
    /// What the check needs of one field, in one place: a call's member is matched and checked with one array read.
    private struct Field: Sendable {
        var name: String
        var length: Int
        /// The cases of ``JSONValue`` it takes at once, one bit each (``JSONValue/caseBit``).
        var accepted: UInt16
        /// An `object` (or `?object`): a value kept as text fits when it is one.
        var takesObject: Bool
        /// Checked the general way: an array, a map, a named type.
        var general: Bool
        var nullable: Bool
    }

    private let fields: [VarlinkField]
    private let definitions: [String: VarlinkType]
    private let plan: [Field]
    private let required: Int

    public init(fields: [VarlinkField], definitions: [String: VarlinkType]) {
        self.fields = fields
        self.definitions = definitions
        var plan: [Field] = []
        for field in fields {
            var type = field.type
            var bits: UInt16 = 0
            if case .optional(let wrapped) = type {
                type = wrapped
                bits |= JSONValue.null.caseBit
            }
            let nullable = bits != 0
            switch type {
            case .string: bits |= JSONValue.string("").caseBit
            case .int: bits |= JSONValue.int(0).caseBit
            case .float: bits |= JSONValue.int(0).caseBit | JSONValue.double(0).caseBit
            case .bool: bits |= JSONValue.bool(false).caseBit
            case .object: bits |= JSONValue.object([:]).caseBit
            case .any: bits |= ~JSONValue.null.caseBit
            default: break
            }
            plan.append(
                Field(
                    name: field.name,
                    length: field.name.utf8.count,
                    accepted: bits,
                    takesObject: type == .object,
                    general: !type.isPlain,
                    nullable: nullable
                )
            )
        }
        self.plan = plan
        self.required = plan.filter { !$0.nullable }.count
    }

    /// The first parameter that does not fit its declared type, or `nil`.
    public func mismatch(_ members: JSONObject) -> VarlinkTypeMismatch? {
        let fits = self.plan.withUnsafeBufferPointer { plan in
            members.withMembers { members in
                var required = 0
                for index in members.indices {
                    let length = members[index].key.utf8.count
                    var position = 0
                    while position < plan.count, plan[position].length != length || plan[position].name != members[index].key {
                        position += 1
                    }
                    // A member the interface does not declare is left alone.
                    guard position < plan.count else { continue }
                    // Read in place: a copy of the field would copy its name.
                    if !plan[position].nullable { required += 1 }
                    if plan[position].accepted & members[index].value.caseBit != 0 { continue }
                    if plan[position].takesObject, members[index].value.isObject { continue }
                    if plan[position].general,
                        self.fields[position].type.mismatch(members[index].value, definitions: self.definitions) == nil
                    {
                        continue
                    }
                    return false
                }
                return required == self.required
            }
        }
        return fits ? nil : VarlinkType.mismatch(members, fields: self.fields, definitions: self.definitions)
    }
}

extension VarlinkType {
    /// Whether a value of this type is told by its case alone.
    fileprivate var isPlain: Bool {
        switch self {
        case .bool, .int, .float, .string, .object, .any: return true
        default: return false
        }
    }
}

extension JSONValue {
    /// One bit for each case, read without copying what the value holds.
    var caseBit: UInt16 {
        switch self {
        case .null: return 1 << 0
        case .bool: return 1 << 1
        case .int: return 1 << 2
        case .double: return 1 << 3
        case .string: return 1 << 4
        case .array: return 1 << 5
        case .object: return 1 << 6
        case .text: return 1 << 7
        }
    }
}
