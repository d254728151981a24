import CoalesceCore
import Varlink

/// `io.coalesced.System`: what the daemon is doing.
enum SystemInterface {
    static func make(daemon: DaemonState, statistics: VarlinkServerStatistics, apps: AppDirectory) -> VarlinkInterface {
        VarlinkInterface(
            text: InterfaceText.ioCoalescedSystem,
            methods: [
                "Stats": .immediate { _ in
                    let connections = statistics.snapshot
                    let state = daemon.snapshot
                    let stats: [String: JSONValue] = [
                        "version": .string(CoalescedVersion.string),
                        "uptimeSec": .double(state.uptime.seconds),
                        "connections": .int(Int64(connections.connections)),
                        "connectionsTotal": .int(Int64(connections.connectionsTotal)),
                        "connectionsRefused": .int(Int64(connections.connectionsRefused)),
                        "calls": .int(Int64(connections.calls)),
                        "protocolErrors": .int(Int64(connections.protocolErrors)),
                        "reloads": .int(Int64(state.reloads)),
                        "apps": .int(Int64(apps.count)),
                        "failedReloads": .int(Int64(state.failedReloads)),
                        "limits": [
                            "maxMessageSize": .int(Int64(state.configuration.maxMessageSize)),
                            "maxConnections": .int(Int64(state.configuration.maxConnections)),
                            "maxApps": .int(Int64(state.configuration.maxApps)),
                        ],
                    ]
                    return ["stats": .object(stats)]
                },
                "ListApps": .immediate { request in
                    try Authorization.requireAdmin(request.peer, group: daemon.configuration.adminGroup)
                    return ["apps": .array(apps.list().map(AppInterface.info))]
                },
                "GetApp": .immediate { request in
                    try Authorization.requireAdmin(request.peer, group: daemon.configuration.adminGroup)
                    return ["app": AppInterface.info(try apps.get(try request.string("app")))]
                },
            ]
        )
    }
}

/// The release of coalesced.
public enum CoalescedVersion {
    public static let string = "0.1.0"
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
