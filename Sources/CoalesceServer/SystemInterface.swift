import CoalesceCore
import CoalesceStore
import CoalesceWire
import Varlink

/// `io.coalesced.System`: what the daemon is doing, and the operator's hand on the apps.
enum SystemInterface {
    static func make(
        daemon: DaemonState,
        statistics: VarlinkServerStatistics,
        apps: AppManager,
        notifications: NotificationCenter,
        system: SystemFollower,
        pressure: PressureMonitor,
        journal: JournalWatches
    ) -> VarlinkInterface {
        /// Every method but Stats is for admins.
        @Sendable func admin(_ request: VarlinkRequest) throws(VarlinkError) {
            try Authorization.requireAdmin(request.peer, group: daemon.configuration.adminGroup)
        }
        return VarlinkInterface(
            text: InterfaceText.ioCoalescedSystem,
            methods: [
                "Stats": .immediate { request in
                    let connections = statistics.snapshot
                    let state = daemon.snapshot
                    let lifecycle = apps.statistics
                    var states: JSONObject = [:]
                    for appState in AppState.allCases { states[appState.rawValue] = .int(Int64(lifecycle.states[appState] ?? 0)) }
                    var stats: JSONObject = [
                        "version": .string(CoalescedVersion.string),
                        "uptimeSec": .double(state.uptime.seconds),
                        "connections": .int(Int64(connections.connections)),
                        "connectionsTotal": .int(Int64(connections.connectionsTotal)),
                        "connectionsRefused": .int(Int64(connections.connectionsRefused)),
                        "calls": .int(Int64(connections.calls)),
                        "protocolErrors": .int(Int64(connections.protocolErrors)),
                        "reloads": .int(Int64(state.reloads)),
                        "apps": .int(Int64(apps.count)),
                        "states": .object(states),
                        "transitions": .int(Int64(lifecycle.transitions)),
                        "storeWritable": .bool(apps.store.isWritable),
                        "setAside": .array(apps.setAside.map { summary in
                            [
                                "app": .string(summary.app), "rows": .int(Int64(summary.rows)), "at": .double(summary.at),
                                "reason": .string(summary.reason),
                            ]
                        }),
                        "events": .object({
                            let events = apps.eventStatistics
                            return [
                                "postsSent": .int(Int64(events.sent)), "postsHeld": .int(Int64(events.held)),
                                "kindsHeld": .int(Int64(events.kindsHeld)),
                                "unacknowledged": .int(Int64(events.unacknowledged)),
                            ]
                        }()),
                        "failedReloads": .int(Int64(state.failedReloads)),
                        "memoryPressure": pressure.statsJSON,
                        "quotas": .object({
                            let usage = apps.quotaUsage(of: request.peer?.uid ?? 0)
                            return [
                                "heldBytes": .int(Int64(usage.held)),
                                "heldBytesLimit": .int(Int64(usage.ceiling.limit)),
                                "caller": [
                                    "uid": .int(Int64(request.peer?.uid ?? 0)),
                                    "apps": .int(Int64(usage.apps)),
                                    "appsQuota": .string(usage.userApps.name),
                                    "appsLimit": .int(Int64(usage.userApps.limit)),
                                    "heldBytes": .int(Int64(usage.bytes)),
                                    "heldBytesQuota": .string(usage.userHeld.name),
                                    "heldBytesLimit": .int(Int64(usage.userHeld.limit)),
                                ],
                            ]
                        }()),
                        "limits": [
                            "maxMessageSize": .int(Int64(state.configuration.maxMessageSize)),
                            "maxConnections": .int(Int64(state.configuration.maxConnections)),
                            "maxApps": .int(Int64(state.configuration.maxApps)),
                            "launchTimeoutSec": state.configuration.launchTimeout.secondsValue,
                            "acknowledgeTimeoutSec": state.configuration.timings.launchAcknowledgement.secondsValue,
                            "backgroundTaskBudgetSec": state.configuration.timings.backgroundTaskBudget.secondsValue,
                        ],
                    ]
                    stats["system"] = .object(system.statistics)
                    stats["journal"] = journal.statsJSON
                    return ["stats": .object(stats)]
                },
                // An administrator's, or, where [Journal] UserWatches= lets users, a user's of its own entries.
                "AddWatch": .streaming { request, responder in
                    let user = try Self.watchUser(request, journal: journal, admin: admin)
                    guard let definition = request.call.parameters["watch"]?.objectValue else {
                        throw VarlinkError.invalidParameter("watch", reason: "expected a WatchDefinition object")
                    }
                    let start = try Self.watchStart(try self.optionalString(request, "start"))
                    let owner = request.peer ?? VarlinkPeer(pid: 0, uid: 0, gid: 0)
                    try await journal.add(definition, start: start, owner: owner, asUser: user != nil)
                    responder.finish()
                },
                "RemoveWatch": .streaming { request, responder in
                    let user = try Self.watchUser(request, journal: journal, admin: admin)
                    try await journal.remove(try request.string("watch"), user: user)
                    responder.finish()
                },
                "ListWatches": .immediate { request in
                    let user = try Self.watchUser(request, journal: journal, admin: admin)
                    return ["watches": .array(journal.list(user: user))]
                },
                "ListApps": .immediate { request in
                    try admin(request)
                    return ["apps": .array(apps.list().map { Self.info($0, notifications) })]
                },
                "GetApp": .immediate { request in
                    try admin(request)
                    let (snapshot, declarations) = try apps.declared(try request.string("app"))
                    var app = Self.info(snapshot, notifications).objectValue ?? [:]
                    let declared = declarations.json
                    var kinds: JSONObject = [:]
                    for kind in declarations.kinds.keys.sorted(by: { $0.value < $1.value }) {
                        kinds[kind.value] = declarations.kinds[kind]!.wire
                    }
                    app["kinds"] = .object(kinds)
                    app["posters"] = declared["posters"] ?? .null
                    app["topics"] = declared["topics"] ?? .array([])
                    return ["app": .object(app)]
                },
                // Waits for systemd and for the app to attach: off the event loop.
                "Launch": .streaming { request, responder in
                    try admin(request)
                    let destination: LaunchDestination
                    switch request.call.parameters["destination"] {
                    case nil, .null?: destination = .foreground
                    case .string(let text)?:
                        guard let parsed = LaunchDestination(rawValue: text) else {
                            throw VarlinkError.invalidParameter(
                                "destination",
                                reason: "expected foreground or background, got \(JSONValue.string(text).jsonText)"
                            )
                        }
                        destination = parsed
                    default: throw VarlinkError.invalidParameter("destination", reason: "expected a string")
                    }
                    let snapshot = try await apps.launch(name: try request.string("app"), destination: destination)
                    responder.finish(["app": AppInterface.info(snapshot)])
                },
                "Activate": .immediate { request in
                    try admin(request)
                    let name = try request.string("app")
                    guard let scene = try self.optionalString(request, "scene") else {
                        return ["app": AppInterface.info(try apps.activate(name: name))]
                    }
                    return ["app": AppInterface.info(try apps.focus(name: name, scene: scene))]
                },
                "Deactivate": .immediate { request in
                    try admin(request)
                    return ["app": AppInterface.info(try apps.deactivate(name: try self.optionalString(request, "app")))]
                },
                "Interrupt": .immediate { request in
                    try admin(request)
                    let begins: Bool
                    switch try request.string("phase") {
                    case "begin": begins = true
                    case "end": begins = false
                    case let phase:
                        throw VarlinkError.invalidParameter(
                            "phase",
                            reason: "expected begin or end, got \(JSONValue.string(phase).jsonText)"
                        )
                    }
                    let snapshot = try apps.interrupt(name: try self.optionalString(request, "app"), begins: begins)
                    return ["app": AppInterface.info(snapshot)]
                },
                "Terminate": .immediate { request in
                    try admin(request)
                    return ["app": AppInterface.info(try apps.terminate(name: try request.string("app")))]
                },
                "Purge": .immediate { request in
                    try admin(request)
                    var count = 1
                    if let value = request.call.parameters["count"], value != .null {
                        guard let number = value.intValue, number >= 1, number <= 1_000_000 else {
                            throw VarlinkError.invalidParameter("count", reason: "must be between 1 and 1000000")
                        }
                        count = Int(number)
                    }
                    let purged = try apps.purge(name: try self.optionalString(request, "app"), count: count)
                    return ["purged": .array(purged.map { .string($0.value) })]
                },
                "Explain": .immediate { request in
                    try admin(request)
                    let name = try request.string("app")
                    let refreshes = (try? AppName(name)).map { system.refreshes.facts(of: $0, wall: apps.wall()) } ?? []
                    let explained = try apps.explain(name: name, refreshes: refreshes)
                    var reply: JSONObject = [
                        "app": .string(try request.string("app")), "state": .string(explained.explanation.state.rawValue),
                        "since": .double(explained.since),
                        "because": .array(
                            explained.explanation.reasons.map { ["code": .string($0.code), "text": .string($0.text)] }
                        ),
                    ]
                    if let reason = explained.reason { reply["reason"] = .string(reason.rawValue) }
                    return reply
                },
                "GetQueue": .immediate { request in
                    try admin(request)
                    let queue = try apps.queue(of: try request.string("app"))
                    return [
                        "held": .array(
                            queue.held.map { kind, slot in
                                [
                                    "kind": .string(kind.value), "policy": slot.policy.wire,
                                    "count": .int(Int64(slot.count)), "firstPosted": .double(slot.first),
                                    "lastPosted": .double(slot.last),
                                ]
                            }
                        ),
                        "unacknowledged": .int(Int64(queue.unacknowledged)),
                    ]
                },
                "Monitor": .streaming { request, responder in
                    try admin(request)
                    guard responder.streams else { throw VarlinkError.expectedMore }
                    try await apps.monitor(try Self.monitorFilter(request), responder: responder)
                },
            ]
        )
    }

    /// An app as ListApps and GetApp show it: as every interface does, with its badge and notification counts.
    private static func info(_ snapshot: AppManager.Snapshot, _ notifications: NotificationCenter) -> JSONValue {
        var app = AppInterface.info(snapshot).objectValue ?? [:]
        let summary = notifications.summary(of: snapshot.registration.name)
        app["badge"] = .int(Int64(summary.badge))
        app["notificationsPending"] = .int(Int64(summary.pending))
        app["notificationsDelivered"] = .int(Int64(summary.delivered))
        app["scenes"] = .array(
            snapshot.scenes.map { scene in
                [
                    "id": .string(scene.id.value), "state": .string(scene.state.rawValue),
                    "source": .string(scene.source.rawValue), "title": .string(scene.title),
                ]
            }
        )
        return .object(app)
    }

    /// Monitor's `watch`, `apps` and `kinds` (arrays of strings, as the server checked), each name checked.
    private static func monitorFilter(_ request: VarlinkRequest) throws(VarlinkError) -> MonitorFilter {
        var filter = MonitorFilter()
        let watch = Self.strings(request, "watch")
        if !watch.isEmpty {
            filter.records = []
            for (index, name) in watch.enumerated() {
                guard let records = MonitorFilter.Records.names.first(where: { $0.0 == name })?.1 else {
                    let names = MonitorFilter.Records.names.map(\.0).joined(separator: ", ")
                    throw .invalidParameter(
                        "watch[\(index)]",
                        reason: "unknown record \(JSONValue.string(name).jsonText); expected \(names)"
                    )
                }
                filter.records.formUnion(records)
            }
        }
        let apps = Self.strings(request, "apps")
        if !apps.isEmpty {
            var names: Set<AppName> = []
            for (index, name) in apps.enumerated() {
                do { names.insert(try AppName(name)) } catch {
                    throw .invalidParameter("apps[\(index)]", reason: error.reason)
                }
            }
            filter.apps = names
        }
        let kinds = Self.strings(request, "kinds")
        if !kinds.isEmpty {
            var names: Set<EventKind> = []
            for (index, name) in kinds.enumerated() {
                do { names.insert(try EventKind(name)) } catch {
                    throw .invalidParameter("kinds[\(index)]", reason: error.reason)
                }
            }
            filter.kinds = names
        }
        return filter
    }

    /// An optional array of strings the server checked against the interface; empty when left out or null.
    private static func strings(_ request: VarlinkRequest, _ name: String) -> [String] {
        request.call.parameters[name]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    private static func optionalString(_ request: VarlinkRequest, _ name: String) throws(VarlinkError) -> String? {
        switch request.call.parameters[name] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw .invalidParameter(name, reason: "expected a string")
        }
    }
    /// Who calls a watch method: `nil` for an administrator; a user's uid where users may have watches of their
    /// own; otherwise PermissionDenied.
    static func watchUser(
        _ request: VarlinkRequest,
        journal: JournalWatches,
        admin: (VarlinkRequest) throws(VarlinkError) -> Void
    ) throws(VarlinkError) -> UInt32? {
        do {
            try admin(request)
            return nil
        } catch {
            guard journal.userWatches > 0, let peer = request.peer else { throw error }
            return peer.uid
        }
    }

    /// AddWatch's `start`: tail (the default), head, cursor=CURSOR or since=SECONDS.
    static func watchStart(_ text: String?) throws(VarlinkError) -> WatchStart {
        guard let text else { return .tail }
        guard let start = WatchDefinition.start(parsing: text) else {
            throw VarlinkError.invalidParameter(
                "start", reason: "expected tail, head, cursor=CURSOR (a journal cursor) or since=SECONDS, got \(JSONValue.string(text).jsonText)"
                    + " (since= takes seconds since the epoch, before 1e11)"
            )
        }
        return start
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

}
