import CoalesceCore
import CoalesceWire
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
                    let app = try request.string("app")
                    try center.cancel(app: app, ids: try self.ids(request, app: app), peer: request.peer) { result in
                        Self.answer(reply, result) { ["cancelled": .int(Int64($0))] }
                    }
                },
                "ListPending": .immediate { request in
                    let pending = try center.pending(app: try request.string("app"), peer: request.peer)
                    return ["pending": .array(pending.map { .object(NotificationWire.pending($0).wire) })]
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
                    let app = try request.string("app")
                    try center.removeDelivered(app: app, ids: try self.ids(request, app: app), peer: request.peer) { result in
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
                    let (app, id, action, text) = try self.response(request)
                    try await center.respond(app: app, id: id, action: action, text: text, peer: request.peer)
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

    /// Respond's `app`, `id`, `action` and `text` (``AlertResponseForm/respond(app:)``). An id, action or text with a NUL is refused: no request's id or
    /// action holds one, and the text goes to the app as it came; one with another control character is looked for.
    static func response(_ request: VarlinkRequest) throws -> (app: String, id: String, action: String, text: String?) {
        let (app, id, action) = (try request.string("app"), try request.string("id"), try request.string("action"))
        let text = request.call.parameters["text"]?.stringValue
        let problem = ControlCharacters.problem(inText: id, field: "the id")
            ?? ControlCharacters.problem(inText: action, field: "the action")
            ?? text.flatMap { ControlCharacters.problem(inText: $0, field: "text") }
        if let problem { throw NotificationError.invalidRequest(app: app, id: id, reason: problem) }
        return (app, id, action, text)
    }

    /// Cancel's and RemoveDelivered's `ids` or `all`: the ids, or `nil` for all; one of them, not both. An id with
    /// a NUL is no request's (the store cannot keep one), and is refused rather than looked for; one with another
    /// control character may be an older daemon's, and is looked for.
    static func ids(_ request: VarlinkRequest, app: String) throws -> [String]? {
        let all = request.call.parameters["all"]?.boolValue ?? false
        let ids = request.call.parameters["ids"]?.arrayValue?.compactMap(\.stringValue)
        for id in ids ?? [] {
            if let problem = ControlCharacters.problem(inText: id, field: "the id") {
                throw NotificationError.invalidRequest(app: app, id: id, reason: problem)
            }
        }
        switch (ids, all) {
        case (nil, true): return nil
        case (let ids?, false): return ids
        case (_?, true): throw VarlinkError.invalidParameter("all", reason: "give ids or all, not both")
        case (nil, false): throw VarlinkError.invalidParameter("ids", reason: "give the ids to remove, or all: true")
        }
    }
}
