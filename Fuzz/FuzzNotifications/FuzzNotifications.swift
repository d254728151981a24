import CoalesceCore
@testable import CoalesceServer
import Varlink

/// The parameters of io.coalesced.Notifications that need no running daemon: Schedule's `request` as
/// `NotificationWire` reads it, checked by `AlertRequest.validate()` and taken by a scheduler at a fixed instant (the
/// calendar's `neverFires` check), with the record the store keeps of it; Respond's `id`, `action` and `text`;
/// Cancel's `ids` and `all`; and any text read as a stored record, as a damaged store hands it back.
///
/// The input is JSON text: the parameters of a call. Properties, beyond "no crash":
/// - a refusal has a reason: a `WireProblem` for what is not a request, an `AlertError` for what the scheduler
///   refuses (`neverFires` only for a calendar trigger), as the daemon answers `InvalidRequest`;
/// - no request that validates holds a control character in its id, threadId, categoryId or an action's id, or a
///   NUL in its text (title, subtitle, body, sound, userInfo, an action's title), and one that holds any is refused;
/// - a request that validates writes out to JSON text that reads back as the same request, and what the scheduler
///   keeps of it writes out to the store's text, which reads back as the same record; a stored record that reads
///   is taken up by a scheduler's start, and one that validates writes out to text that reads the same;
/// - Respond and Cancel refuse an id, action or text with a NUL with `InvalidRequest`, and a missing or mistyped
///   parameter with `InvalidParameter` naming it; what they accept is what was given.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNotifications(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    storedRecord(String(decoding: input, as: UTF8.self))
    guard let parameters = (try? JSONParser.parse(input))?.objectValue else { return 0 }
    if let request = parameters["request"] { schedule(request) }
    let call = VarlinkRequest(call: VarlinkCall(method: "io.coalesced.Notifications.Respond", parameters: parameters), peer: nil)
    respond(call)
    cancel(call)
    return 0
}

/// The app every request is scheduled for.
private let app = try! AppName("org.example.app")  // a valid name
/// The zone files of the machine (UTC even without them).
private let zones = ZoneDatabase()
/// The machine's zone for floating calendar rules: one with daylight saving time where the files are.
private let localZone = (try? zones.rules(named: "Europe/Berlin")) ?? .utc
/// The instant every request is scheduled at: 2025-11-24 16:00:00 UTC, 1000 s after boot.
private let now = ClockReading(wall: WallTime(seconds: 1_764_000_000), boot: BootTime(nanoseconds: 1_000_000_000_000))

/// Schedule's request: read, checked, written out and read back, then taken by a scheduler and kept as the store
/// keeps it.
private func schedule(_ value: JSONValue) {
    let request: AlertRequest
    do {
        request = try NotificationWire.request(value, zones: zones)
    } catch {
        check(!error.description.isEmpty, "a request refused without a reason: \(value.jsonText)")
        return
    }
    do {
        try request.validate()
    } catch {
        refused(request, error)
        return
    }
    if let problem = forbiddenCharacter(in: request) { fail("a request that validates holds \(problem): \(request)") }

    let written = NotificationWire.json(request).jsonText
    do {
        let again = try NotificationWire.request(try JSONParser.parse(written), zones: zones)
        check(again == request, "a request written as \(written) reads back as another: \(again), not \(request)")
    } catch {
        fail("a request's own text \(written) does not read: \(error)")
    }

    var scheduler = AlertScheduler(localZone: localZone)
    let actions: [AlertAction]
    do {
        actions = try scheduler.schedule(request, for: app, now: now)
    } catch {
        guard case .neverFires = error, case .calendar = request.trigger else {
            fail("the scheduler refused a request that validates, for another reason than a calendar that never fires: \(error)")
        }
        refused(request, error)
        return
    }
    for case .keep(let record) in actions {
        storedRecord(NotificationWire.storeText(record), expecting: record)
    }
}

/// The scheduler's refusal of `request`, as the daemon answers it: `InvalidRequest` with a reason.
private func refused(_ request: AlertRequest, _ error: AlertError) {
    let answer = NotificationError(error, app: app, id: request.id)
    guard case .invalidRequest(app.value, request.id, let reason) = answer, !reason.isEmpty else {
        fail("\(request) refused with \(error), answered as \(answer)")
    }
}

/// A record the store hands back; `expecting`: the record its text was written from, which it must read as.
private func storedRecord(_ text: String, expecting expected: AlertRecord? = nil) {
    let record: AlertRecord
    do {
        record = try NotificationWire.record(text, app: app, zones: zones)
    } catch {
        check(expected == nil, "the record written as \(text) does not read: \(error)")
        check(!error.description.isEmpty, "a stored record refused without a reason")
        return
    }
    if let expected {
        check(record == expected, "the record written as \(text) reads back as another: \(record), not \(expected)")
        return
    }
    // A start takes up whatever reads, and handles what came due meanwhile.
    var scheduler = AlertScheduler(localZone: localZone)
    _ = scheduler.started(restoring: [record], now: now)
    guard (try? record.request.validate()) != nil else { return }
    let written = NotificationWire.storeText(record)
    do {
        let again = try NotificationWire.record(written, app: app, zones: zones)
        check(again == record, "a stored record written as \(written) reads back as another: \(again), not \(record)")
    } catch {
        fail("a stored record's own text \(written) does not read: \(error)")
    }
}

/// What in the request no accepted one may hold, found without `controlCharacterProblem`: a control character in a
/// name, a NUL in text; `nil` when there is none.
private func forbiddenCharacter(in request: AlertRequest) -> String? {
    let content = request.content
    var names = [("the id", request.id)] + content.actions.map { ("an action's id", $0.id) }
    if let thread = content.threadID { names.append(("threadId", thread)) }
    if let category = content.categoryID { names.append(("categoryId", category)) }
    for (field, name) in names where name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
        return "a control character in \(field)"
    }
    var texts = [("title", content.title), ("subtitle", content.subtitle), ("body", content.body), ("userInfo", content.userInfo)]
    texts += content.actions.map { ("an action's title", $0.title) }
    if let sound = content.sound { texts.append(("sound", sound)) }
    for (field, text) in texts where hasNUL(text) {
        return "a NUL in \(field)"
    }
    return nil
}

/// Respond's `app`, `id`, `action` and `text`, as its handler reads them before it looks for the notification.
private func respond(_ call: VarlinkRequest) {
    let parameters = call.call.parameters
    let given = ["app", "id", "action"].map { parameters[$0]?.stringValue }
    let text = parameters["text"]?.stringValue
    let nul = given.contains { $0.map(hasNUL) == true } || text.map(hasNUL) == true
    do {
        let response = try NotificationsInterface.response(call)
        check(
            [response.app, response.id, response.action] == given && response.text == text,
            "Respond read \(response) from \(JSONValue.object(parameters).jsonText)"
        )
        check(![response.id, response.action].contains(where: hasNUL) && response.text.map(hasNUL) != true, "Respond took a NUL: \(response)")
    } catch let error as VarlinkError {
        let missing = zip(["app", "id", "action"], given).first { $0.1 == nil }?.0
        check(
            missing != nil && error == .invalidParameter(missing!, reason: "expected a string"),
            "Respond refused \(JSONValue.object(parameters).jsonText) with \(error)"
        )
    } catch let error as NotificationError {
        guard case .invalidRequest(let app, let id, let reason) = error else { fail("Respond refused with \(error)") }
        check(
            nul && app == given[0] && id == given[1] && !reason.isEmpty,
            "Respond refused \(JSONValue.object(parameters).jsonText) with \(error)"
        )
    } catch {
        fail("Respond refused with \(error)")
    }
}

/// Cancel's (and RemoveDelivered's) `ids` or `all`.
private func cancel(_ call: VarlinkRequest) {
    let parameters = call.call.parameters
    let all = parameters["all"]?.boolValue ?? false
    let given = parameters["ids"]?.arrayValue?.compactMap(\.stringValue)
    do {
        let ids = try NotificationsInterface.ids(call, app: app.value)
        switch ids {
        case let ids?:
            check(!all && ids == given, "Cancel read ids \(ids) from \(JSONValue.object(parameters).jsonText)")
            check(!ids.contains(where: hasNUL), "Cancel took an id with a NUL: \(ids)")
        case nil:
            check(all && given == nil, "Cancel read all from \(JSONValue.object(parameters).jsonText)")
        }
    } catch let error as VarlinkError {
        let expected: VarlinkError? =
            switch (given, all) {
            case (_?, true): .invalidParameter("all", reason: "give ids or all, not both")
            case (nil, false): .invalidParameter("ids", reason: "give the ids to remove, or all: true")
            default: nil
            }
        check(error == expected && given?.contains(where: hasNUL) != true, "Cancel refused \(JSONValue.object(parameters).jsonText) with \(error)")
    } catch let error as NotificationError {
        guard case .invalidRequest(app.value, let id, let reason) = error else { fail("Cancel refused with \(error)") }
        check(given?.contains(id) == true && hasNUL(id) && !reason.isEmpty, "Cancel refused \(JSONValue.object(parameters).jsonText) with \(error)")
    } catch {
        fail("Cancel refused with \(error)")
    }
}

private func hasNUL(_ text: String) -> Bool { text.utf8.contains(0) }

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-notifications: \(message)")
}
