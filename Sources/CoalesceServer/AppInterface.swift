import CoalesceCore
import Varlink

/// `io.coalesced.App`: an app acting for itself.
enum AppInterface {
    static let maximumModes = 32
    static let maximumModeLength = 64

    static func make(apps: AppDirectory, daemon: DaemonState) -> VarlinkInterface {
        VarlinkInterface(
            text: InterfaceText.ioCoalescedApp,
            methods: [
                // Runs off the event loop: it waits for the registry to reach the disk.
                "Register": .streaming { request, responder in
                    guard let peer = request.peer else { throw VarlinkError.permissionDenied }
                    let registration = try apps.register(
                        name: try request.string("name"),
                        traits: AppTraits(
                            backgroundModes: try self.backgroundModes(request.call.parameters["backgroundModes"]),
                            exitsOnSuspend: try self.flag(request.call.parameters["exitsOnSuspend"], "exitsOnSuspend")
                        ),
                        launchUnit: try self.launchUnit(request.call.parameters["launchUnit"]),
                        uid: peer.uid,
                        limit: daemon.configuration.maxApps
                    )
                    let snapshot = try apps.get(registration.name.value)
                    responder.finish(["app": self.info(snapshot)])
                }
            ]
        )
    }

    /// An app as both interfaces describe it (`AppInfo`, `App`).
    static func info(_ snapshot: AppDirectory.Snapshot) -> JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(snapshot.registration.name.value),
            "state": .string(snapshot.state.rawValue),
            "owner": .int(Int64(snapshot.registration.owner)),
            "backgroundModes": .array(snapshot.registration.traits.backgroundModes.sorted().map { .string($0) }),
            "exitsOnSuspend": .bool(snapshot.registration.traits.exitsOnSuspend),
        ]
        if let unit = snapshot.registration.launchUnit { object["launchUnit"] = .string(unit) }
        return .object(object)
    }

    private static func backgroundModes(_ value: JSONValue?) throws(VarlinkError) -> Set<String> {
        guard let value, value != .null else { return [] }
        guard let modes = value.arrayValue?.compactMap(\.stringValue), modes.count == value.arrayValue?.count,
            modes.count <= self.maximumModes,
            modes.allSatisfy({ !$0.isEmpty && $0.utf8.count <= self.maximumModeLength })
        else { throw .invalidParameter("backgroundModes") }
        return Set(modes)
    }

    private static func flag(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> Bool {
        guard let value, value != .null else { return false }
        guard let flag = value.boolValue else { throw .invalidParameter(name) }
        return flag
    }

    private static func launchUnit(_ value: JSONValue?) throws(VarlinkError) -> String? {
        guard let value, value != .null else { return nil }
        guard let unit = value.stringValue, unit.hasSuffix(".service"), unit.count > ".service".count,
            unit.utf8.count <= 255, !unit.contains("/")
        else { throw .invalidParameter("launchUnit") }
        return unit
    }
}
