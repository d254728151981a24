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
