/// A JSON value as Varlink carries it.
///
/// Integers and floating-point numbers are kept apart so that an `int` field written by a peer reads back exactly
/// and prints without a fraction.
///
/// A value may also be held as its text (``text(_:)``), where a receiver asked the parser to keep it so; it reads
/// and compares as the value it stands for.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
    /// A value as the text it came in, parsed only when its parts are read.
    case text(JSONText)
}

extension JSONValue {
    /// The value itself: a value held as text, parsed.
    public var resolved: JSONValue {
        if case .text(let text) = self { return text.value }
        return self
    }

    /// The object's members, or `nil` when this is not an object.
    public var objectValue: JSONObject? {
        switch self {
        case .object(let members): return members
        case .text(let text) where text.isObject: return text.value.objectValue
        default: return nil
        }
    }

    /// Whether this is an object; a value held as text is not parsed to tell.
    public var isObject: Bool {
        switch self {
        case .object: return true
        case .text(let text): return text.isObject
        default: return false
        }
    }

    /// The string, or `nil` when this is not a string.
    public var stringValue: String? {
        switch self {
        case .string(let value): return value
        case .text(let text): return text.value.stringValue
        default: return nil
        }
    }

    /// The boolean, or `nil` when this is not a boolean.
    public var boolValue: Bool? {
        switch self {
        case .bool(let value): return value
        case .text(let text): return text.value.boolValue
        default: return nil
        }
    }

    /// The integer, or `nil` when this is not a number with an exact integer value.
    public var intValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.2e18: return Int64(value)
        case .text(let text): return text.value.intValue
        default: return nil
        }
    }

    /// The number as a `Double`, or `nil` when this is not a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        case .text(let text): return text.value.doubleValue
        default: return nil
        }
    }

    /// The elements, or `nil` when this is not an array.
    public var arrayValue: [JSONValue]? {
        switch self {
        case .array(let elements): return elements
        case .text(let text): return text.value.arrayValue
        default: return nil
        }
    }

    /// Looks up a member of an object; `nil` for a missing member or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        self.objectValue?[key]
    }
}

// A value held as text equals the value it stands for: how a value is held is no part of what it says.
extension JSONValue: Hashable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let left), .bool(let right)): return left == right
        case (.int(let left), .int(let right)): return left == right
        case (.double(let left), .double(let right)): return left == right
        case (.string(let left), .string(let right)): return left == right
        case (.array(let left), .array(let right)): return left == right
        case (.object(let left), .object(let right)): return left == right
        case (.text(let left), .text(let right)) where left.sameText(as: right): return true
        case (.text, _), (_, .text): return lhs.resolved == rhs.resolved
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(1); hasher.combine(value)
        case .int(let value): hasher.combine(2); hasher.combine(value)
        case .double(let value): hasher.combine(3); hasher.combine(value)
        case .string(let value): hasher.combine(4); hasher.combine(value)
        case .array(let elements): hasher.combine(5); hasher.combine(elements)
        case .object(let members): hasher.combine(6); hasher.combine(members)
        case .text(let text): text.value.hash(into: &hasher)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}
