import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A value read from a D-Bus message, whatever its signature: what a signal or a reply carries, copied out of the
/// message so that it outlives it.
public indirect enum BusValue: Sendable, Equatable {
    case bool(Bool)
    /// y, n, i, x
    case int(Int64)
    /// q, u, t
    case uint(UInt64)
    case double(Double)
    /// s, o, g
    case string(String)
    /// h: a duplicate the receiver owns and must close.
    case fileDescriptor(Int32)
    case array([BusValue])
    /// An array of dictionary entries with string keys, such as PropertiesChanged's a{sv}.
    case dictionary([String: BusValue])
    case structure([BusValue])
    case variant(BusValue)

    public var boolValue: Bool? {
        if case .bool(let value) = self.unwrapped { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self.unwrapped { return value }
        return nil
    }

    public var uintValue: UInt64? {
        switch self.unwrapped {
        case .uint(let value): return value
        case .int(let value) where value >= 0: return UInt64(value)
        default: return nil
        }
    }

    /// The strings of an `as`.
    public var stringsValue: [String]? {
        guard case .array(let elements) = self.unwrapped else { return nil }
        let strings = elements.compactMap(\.stringValue)
        return strings.count == elements.count ? strings : nil
    }

    public var structureValue: [BusValue]? {
        if case .structure(let members) = self.unwrapped { return members }
        return nil
    }

    public var dictionaryValue: [String: BusValue]? {
        switch self.unwrapped {
        case .dictionary(let entries): return entries
        case .array(let elements) where elements.isEmpty: return [:]
        default: return nil
        }
    }

    /// The value inside any variants.
    public var unwrapped: BusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }
}

/// An argument of a method call; the basic types the daemon's calls pass.
public enum BusArgument: Sendable, Equatable {
    case string(String)
    case objectPath(String)
    case bool(Bool)
    case uint32(UInt32)
    case uint64(UInt64)
    case int32(Int32)
}

extension BusArgument {
    func append(to message: OpaquePointer?) -> Int32 {
        switch self {
        case .string(let text): return text.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
        case .objectPath(let path): return path.withCString { sd_bus_message_append_basic(message, Self.type("o"), $0) }
        case .bool(let flag):
            var value: Int32 = flag ? 1 : 0
            return sd_bus_message_append_basic(message, Self.type("b"), &value)
        case .uint32(var value): return sd_bus_message_append_basic(message, Self.type("u"), &value)
        case .uint64(var value): return sd_bus_message_append_basic(message, Self.type("t"), &value)
        case .int32(var value): return sd_bus_message_append_basic(message, Self.type("i"), &value)
        }
    }

    private static func type(_ letter: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: letter)) }
}

/// Reads every remaining value of a message (or of the container it has entered) into ``BusValue``s.
enum BusMessageReader {
    static func readAll(_ message: OpaquePointer?) throws(SystemdError) -> [BusValue] {
        var values: [BusValue] = []
        while let next = try self.peek(message) {
            values.append(try self.read(message, type: next.type, contents: next.contents))
        }
        return values
    }

    private static func peek(_ message: OpaquePointer?) throws(SystemdError) -> (type: UInt8, contents: String?)? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let result = sd_bus_message_peek_type(message, &type, &contents)
        if result == 0 { return nil }  // the end of the message or container
        try SystemdError.check(result, "read a D-Bus message")
        return (UInt8(bitPattern: type), contents.map { String(cString: $0) })
    }

    private static func read(_ message: OpaquePointer?, type: UInt8, contents: String?) throws(SystemdError) -> BusValue {
        switch type {
        case UInt8(ascii: "a"):
            let contents = contents ?? ""
            try self.enter(message, type: type, contents: contents)
            let value: BusValue
            if contents.hasPrefix("{s") {
                var entries: [String: BusValue] = [:]
                while let entry = try self.peek(message) {
                    try self.enter(message, type: entry.type, contents: entry.contents ?? "")
                    let members = try self.readAll(message)
                    try SystemdError.check(sd_bus_message_exit_container(message), "read a D-Bus dictionary entry")
                    if members.count == 2, let key = members[0].stringValue { entries[key] = members[1] }
                }
                value = .dictionary(entries)
            } else {
                value = .array(try self.readAll(message))
            }
            try SystemdError.check(sd_bus_message_exit_container(message), "read a D-Bus array")
            return value
        case UInt8(ascii: "r"), UInt8(ascii: "e"):
            try self.enter(message, type: type, contents: contents ?? "")
            let members = try self.readAll(message)
            try SystemdError.check(sd_bus_message_exit_container(message), "read a D-Bus structure")
            return .structure(members)
        case UInt8(ascii: "v"):
            try self.enter(message, type: type, contents: contents ?? "")
            let inner = try self.readAll(message)
            try SystemdError.check(sd_bus_message_exit_container(message), "read a D-Bus variant")
            return .variant(inner.first ?? .structure([]))
        default:
            return try self.readBasic(message, type: type)
        }
    }

    private static func enter(_ message: OpaquePointer?, type: UInt8, contents: String) throws(SystemdError) {
        try SystemdError.check(
            contents.withCString { sd_bus_message_enter_container(message, CChar(bitPattern: type), $0) },
            "read a D-Bus container"
        )
    }

    private static func readBasic(_ message: OpaquePointer?, type: UInt8) throws(SystemdError) -> BusValue {
        let letter = CChar(bitPattern: type)
        func read<T: BitwiseCopyable>(_ initial: T) throws(SystemdError) -> T {
            var value = initial
            let result = withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(message, letter, $0) }
            try SystemdError.check(result, "read a D-Bus value")
            return value
        }
        switch type {
        case UInt8(ascii: "b"): return .bool(try read(Int32(0)) != 0)  // an int, not a bool (sd_bus_message_read_basic(3))
        case UInt8(ascii: "y"): return .uint(UInt64(try read(UInt8(0))))
        case UInt8(ascii: "n"): return .int(Int64(try read(Int16(0))))
        case UInt8(ascii: "q"): return .uint(UInt64(try read(UInt16(0))))
        case UInt8(ascii: "i"): return .int(Int64(try read(Int32(0))))
        case UInt8(ascii: "u"): return .uint(UInt64(try read(UInt32(0))))
        case UInt8(ascii: "x"): return .int(try read(Int64(0)))
        case UInt8(ascii: "t"): return .uint(try read(UInt64(0)))
        case UInt8(ascii: "d"): return .double(try read(Double(0)))
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
            let pointer = try read(UnsafePointer<CChar>?.none)
            return .string(pointer.map { String(cString: $0) } ?? "")  // borrowed from the message: copied
        case UInt8(ascii: "h"):
            // The message keeps its descriptor; the value carries a duplicate that no child inherits.
            let borrowed = try read(Int32(-1))
            let duplicate = fcntl(borrowed, F_DUPFD_CLOEXEC, 3)
            guard duplicate >= 0 else { throw SystemdError(operation: "duplicate a descriptor from D-Bus", errno: errno) }
            return .fileDescriptor(duplicate)
        default:
            throw SystemdError(operation: "read a D-Bus value of type '\(Character(Unicode.Scalar(type)))'", errno: EINVAL)
        }
    }
}
