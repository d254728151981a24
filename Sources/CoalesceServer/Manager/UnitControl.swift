import Systemd

/// What the daemon asks systemd about an app's launch unit to freeze and thaw it, on the daemon's bus connection:
/// each call is asynchronous (FreezeUnit answers only once the kernel has frozen the cgroup), and no event loop or
/// thread of Swift's pool waits for it.
struct UnitControl: Sendable {
    /// FreezeUnit: returns once the unit is frozen.
    var freeze: @Sendable (_ unit: String) async throws -> Void
    /// ThawUnit: returns once the unit is thawed.
    var thaw: @Sendable (_ unit: String) async throws -> Void
    /// Why the unit must not be frozen, or `nil` when it may be: systemd before 258 kills a frozen unit whose
    /// watchdog (`WatchdogSec=`) runs out (systemd issue 38517).
    var refusal: @Sendable (_ unit: String) async throws -> String?

    /// systemd's manager on the daemon's bus connection (`nil`: the daemon has none, for `problem`).
    static func systemd(_ bus: BusConnection?, problem: String?) -> UnitControl {
        @Sendable func connected(_ method: String) throws(SystemdError) -> BusConnection {
            guard let bus else {
                throw SystemdError(operation: "call \(Self.manager).\(method)", errno: Errno.ENOTCONN, busError: problem)
            }
            return bus
        }
        return UnitControl(
            freeze: { unit in try await Self.call(connected("FreezeUnit"), "FreezeUnit", unit) },
            thaw: { unit in try await Self.call(connected("ThawUnit"), "ThawUnit", unit) },
            refusal: { unit in
                let bus = try connected("GetUnit")
                let version = try await bus.property(
                    destination: Self.destination, path: Self.path, interface: Self.manager, name: "Version"
                ).stringValue ?? ""
                // "252.39-1~deb12u1", "258", "v258-rc1": the leading digits.
                let major = Int(version.drop { !$0.isNumber }.prefix { $0.isNumber }) ?? 0
                guard major < 258 else { return nil }
                let reply = try await bus.call(
                    destination: Self.destination, path: Self.path, interface: Self.manager, member: "GetUnit",
                    arguments: [.string(unit)]
                )
                guard let object = reply.first?.stringValue else {
                    throw SystemdError(operation: "call \(Self.manager).GetUnit", errno: Errno.EBADMSG)
                }
                let watchdog = try await bus.property(
                    destination: Self.destination, path: object, interface: "org.freedesktop.systemd1.Service",
                    name: "WatchdogUSec"
                ).uintValue ?? 0
                guard watchdog > 0 else { return nil }
                return "\(unit) has WatchdogSec= set, and systemd \(version) kills a frozen unit whose watchdog runs out (fixed in 258)"
            }
        )
    }

    /// For a daemon that cannot reach systemd (tests in process): every unit is refused, so apps are stopped.
    static let unavailable = UnitControl(
        freeze: { _ in },
        thaw: { _ in },
        refusal: { unit in "no systemd manager to freeze \(unit) with" }
    )

    private static let destination = "org.freedesktop.systemd1"
    private static let path = "/org/freedesktop/systemd1"
    private static let manager = "org.freedesktop.systemd1.Manager"

    private static func call(_ bus: BusConnection, _ method: String, _ unit: String) async throws {
        _ = try await bus.call(
            destination: Self.destination, path: Self.path, interface: Self.manager, member: method,
            arguments: [.string(unit)]
        )
    }
}
