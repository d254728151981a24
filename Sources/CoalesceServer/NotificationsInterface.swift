import CoalesceCore
import Varlink

/// `io.coalesced.Notifications`: an app's local notifications, and the presentation agents' stream. A change is
/// answered once on disk, without a task (deferred), so that pipelined calls share the store's commits.
enum NotificationsInterface {
    static func make(center: NotificationCenter) -> VarlinkInterface {
        VarlinkInterface(
            text: InterfaceText.ioCoalescedNotifications,
            methods: [
                "Schedule": .deferred { request, reply in
                    try center.schedule(
                        app: try request.string("app"), request: request.call.parameters["request"] ?? .null, peer: request.peer
                    ) { result in Self.answer(reply, result) { ["next": NotificationWire.seconds($0)] } }
                },
                "Cancel": .deferred { request, reply in
                    try center.cancel(app: try request.string("app"), ids: try self.ids(request), peer: request.peer) { result in
                        Self.answer(reply, result) { ["cancelled": .int(Int64($0))] }
                    }
                },
                "ListPending": .immediate { request in
                    let pending = try center.pending(app: try request.string("app"), peer: request.peer)
                    return [
                        "pending": .array(
                            pending.map { entry in
                                var object: JSONObject = [
                                    "request": NotificationWire.json(entry.request), "next": NotificationWire.seconds(entry.next),
                                ]
                                if let last = entry.lastFire { object["lastFire"] = NotificationWire.seconds(last) }
                                if case .calendar(let components, let zone, _) = entry.request.trigger {
                                    var text = components.description
                                    if case .zoned(let rules) = zone { text += " " + rules.name }
                                    object["calendar"] = .string(text)
                                }
                                return .object(object)
                            }
                        )
                    ]
                },
                "ListDelivered": .immediate { request in
                    let delivered = try center.delivered(app: try request.string("app"), peer: request.peer)
                    return [
                        "delivered": .array(delivered.entries.map { .object($0.entry) }),
                        "dropped": .int(delivered.dropped),
                        "badge": .int(Int64(delivered.badge)),
                    ]
                },
                "RemoveDelivered": .deferred { request, reply in
                    try center.removeDelivered(app: try request.string("app"), ids: try self.ids(request), peer: request.peer) { result in
                        Self.answer(reply, result) { ["removed": .int(Int64($0))] }
                    }
                },
                "SetBadge": .deferred { request, reply in
                    guard let badge = request.call.parameters["badge"]?.intValue, badge >= 0, badge <= Int64(Int32.max) else {
                        throw VarlinkError.invalidParameter("badge", reason: "must be between 0 and \(Int32.max)")
                    }
                    try center.setBadge(app: try request.string("app"), badge: Int(badge), peer: request.peer) { result in
                        Self.answer(reply, result) { _ in [:] }
                    }
                },
                "Respond": .streaming { request, responder in
                    try await center.respond(
                        app: try request.string("app"), id: try request.string("id"), action: try request.string("action"),
                        text: request.call.parameters["text"]?.stringValue, peer: request.peer
                    )
                    responder.finish()
                },
                "Presentations": .streaming { request, responder in
                    guard responder.streams else { throw VarlinkError.expectedMore }
                    await center.serveAgent(responder, peer: request.peer)
                },
            ]
        )
    }

    /// Answers a deferred call with what its change came to, once on disk.
    private static func answer<T>(
        _ reply: VarlinkPromisedReply,
        _ result: Result<T, NotificationError>,
        _ parameters: (T) -> JSONObject
    ) {
        switch result {
        case .success(let value): reply.succeed(parameters(value))
        case .failure(let error): reply.fail(error)
        }
    }

    /// Cancel's and RemoveDelivered's `ids` or `all`: the ids, or `nil` for all; one of them, not both.
    private static func ids(_ request: VarlinkRequest) throws(VarlinkError) -> [String]? {
        let all = request.call.parameters["all"]?.boolValue ?? false
        let ids = request.call.parameters["ids"]?.arrayValue?.compactMap(\.stringValue)
        switch (ids, all) {
        case (nil, true): return nil
        case (let ids?, false): return ids
        case (_?, true): throw .invalidParameter("all", reason: "give ids or all, not both")
        case (nil, false): throw .invalidParameter("ids", reason: "give the ids to remove, or all: true")
        }
    }
}
