import Systemd

/// What the daemon asks systemd about an app's launch unit to freeze and thaw it. Each call blocks (a D-Bus round
/// trip, and FreezeUnit answers only once the kernel has frozen the cgroup): the manager runs them on NIO's thread
/// pool, never on an event loop or Swift's cooperative pool.
struct UnitControl: Sendable {
    /// FreezeUnit: returns once the unit is frozen.
    var freeze: @Sendable (_ unit: String) throws -> Void
    /// ThawUnit: returns once the unit is thawed.
    var thaw: @Sendable (_ unit: String) throws -> Void
    /// Why the unit must not be frozen, or `nil` when it may be: systemd before 258 kills a frozen unit whose
    /// watchdog (`WatchdogSec=`) runs out (systemd issue 38517).
    var refusal: @Sendable (_ unit: String) throws -> String?

    /// systemd's manager on the system bus, or the user's: a new connection per call, as StartUnit makes.
    static func systemd(_ scope: SystemBus.Scope) -> UnitControl {
        UnitControl(
            freeze: { unit in try Self.call("FreezeUnit", unit, scope) },
            thaw: { unit in try Self.call("ThawUnit", unit, scope) },
            refusal: { unit in
                let bus = try SystemBus(scope)
                let version = try bus.stringProperty(
                    destination: Self.destination, path: Self.path, interface: Self.manager, member: "Version"
                )
                // "252.39-1~deb12u1", "258", "v258-rc1": the leading digits.
                let major = Int(version.drop { !$0.isNumber }.prefix { $0.isNumber }) ?? 0
                guard major < 258 else { return nil }
                let object = try bus.callReturningString(
                    destination: Self.destination, path: Self.path, interface: Self.manager, member: "GetUnit",
                    arguments: [unit], replyType: "o"
                )
                let watchdog = try bus.uint64Property(
                    destination: Self.destination, path: object, interface: "org.freedesktop.systemd1.Service",
                    member: "WatchdogUSec"
                )
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

    private static func call(_ method: String, _ unit: String, _ scope: SystemBus.Scope) throws {
        let bus = try SystemBus(scope)
        try bus.call(destination: Self.destination, path: Self.path, interface: Self.manager, member: method, arguments: [unit])
    }
}
