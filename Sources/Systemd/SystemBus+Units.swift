import CSystemd

#if canImport(Glibc)
import Glibc
#endif

extension SystemBus {
    /// Reads an unsigned 64-bit property (D-Bus type `t`), such as a service's `WatchdogUSec`.
    public func uint64Property(
        destination: String,
        path: String,
        interface: String,
        member: String
    ) throws(SystemdError) -> UInt64 {
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var value: UInt64 = 0
        let result = sd_bus_get_property_trivial(
            self.bus, destination, path, interface, member, &error, CChar(UInt8(ascii: "t")), &value
        )
        guard result >= 0 else {
            let busError = error.name.map { name in
                "\(String(cString: name)): \(error.message.map { String(cString: $0) } ?? "")"
            }
            throw SystemdError(operation: "get \(interface).\(member)", errno: -result, busError: busError)
        }
        return value
    }
}

extension SystemBus {
    /// Calls a method with string arguments whose reply carries nothing (FreezeUnit, ThawUnit); returns once the
    /// reply came.
    public func call(
        destination: String,
        path: String,
        interface: String,
        member: String,
        arguments: [String] = [],
        timeout: Duration = .seconds(25)
    ) throws(SystemdError) {
        var message: OpaquePointer?
        let built = sd_bus_message_new_method_call(self.bus, &message, destination, path, interface, member)
        guard built >= 0 else { throw SystemdError(operation: "build a call to \(interface).\(member)", errno: -built) }
        defer { sd_bus_message_unref(message) }
        for argument in arguments {
            let appended = argument.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
            guard appended >= 0 else {
                throw SystemdError(operation: "append an argument to \(interface).\(member)", errno: -appended)
            }
        }
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(self.bus, message, timeout.systemdMicroseconds, &error, &reply)
        defer { sd_bus_message_unref(reply) }
        guard result >= 0 else {
            let busError = error.name.map { name in
                "\(String(cString: name)): \(error.message.map { String(cString: $0) } ?? "")"
            }
            throw SystemdError(operation: "call \(interface).\(member)", errno: -result, busError: busError)
        }
    }
}
