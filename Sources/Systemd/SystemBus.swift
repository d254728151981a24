import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A connection to the system D-Bus (`sd_bus`), for asking systemd and logind.
///
/// Calls block until the reply comes or the timeout passes; use a bus from one thread at a time. Arguments and
/// results are strings for now, which is what the unit and session lookups that use this need.
public final class SystemBus {
    private let bus: OpaquePointer

    /// Which bus: the system's, or the calling user's (where a user's systemd instance listens).
    public enum Scope: Sendable {
        case system
        case user
    }

    /// Connects to the system bus, or to the user's.
    public init(_ scope: Scope = .system) throws(SystemdError) {
        var bus: OpaquePointer?
        switch scope {
        case .system: try SystemdError.check(sd_bus_open_system(&bus), "connect to the system bus")
        case .user: try SystemdError.check(sd_bus_open_user(&bus), "connect to the user bus")
        }
        self.bus = bus!  // set on success
    }

    deinit {
        sd_bus_flush_close_unref(self.bus)
    }

    /// Reads a string property, such as systemd's `Version`.
    public func stringProperty(
        destination: String,
        path: String,
        interface: String,
        member: String
    ) throws(SystemdError) -> String {
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var value: UnsafeMutablePointer<CChar>?
        let result = sd_bus_get_property_string(self.bus, destination, path, interface, member, &error, &value)
        guard result >= 0, let value else {
            throw SystemdError(operation: "get \(interface).\(member)", errno: -result, busError: Self.describe(error))
        }
        defer { free(value) }
        return String(cString: value)
    }

    /// Calls a method with string arguments and returns the string (or, with `replyType` "o", the object path)
    /// its reply starts with.
    public func callReturningString(
        destination: String,
        path: String,
        interface: String,
        member: String,
        arguments: [String] = [],
        replyType: Character = "s",
        timeout: Duration = .seconds(25)
    ) throws(SystemdError) -> String {
        var message: OpaquePointer?
        try SystemdError.check(
            sd_bus_message_new_method_call(self.bus, &message, destination, path, interface, member),
            "build a call to \(interface).\(member)"
        )
        defer { sd_bus_message_unref(message) }
        for argument in arguments {
            try SystemdError.check(
                argument.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) },
                "append an argument to \(interface).\(member)"
            )
        }
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(self.bus, message, timeout.systemdMicroseconds, &error, &reply)
        guard result >= 0 else {
            throw SystemdError(operation: "call \(interface).\(member)", errno: -result, busError: Self.describe(error))
        }
        defer { sd_bus_message_unref(reply) }
        var value: UnsafePointer<CChar>?
        try SystemdError.check(
            sd_bus_message_read_basic(reply, CChar(replyType.asciiValue ?? UInt8(ascii: "s")), &value),
            "read the reply of \(interface).\(member)"
        )
        return value.map { String(cString: $0) } ?? ""  // owned by the reply, copied before it is released
    }

    private static func describe(_ error: sd_bus_error) -> String? {
        guard let name = error.name else { return nil }
        let message = error.message.map { String(cString: $0) } ?? ""
        return "\(String(cString: name)): \(message)"
    }
}
