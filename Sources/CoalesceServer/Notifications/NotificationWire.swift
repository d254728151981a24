import CoalesceCore
import Varlink

/// Local notifications as io.coalesced.Notifications writes them: requests, pending entries and presentations
/// to and from JSON. The store keeps a request in the same form, so that what a client scheduled and what the
/// store holds are read by one function.
enum NotificationWire {
    /// A request as a client sent it (or the store kept it); the Varlink layer has checked the members' types.
    /// - Throws: the reason it is not a request the scheduler can take, for ``NotificationError/invalidRequest``.
    static func request(_ value: JSONValue, zones: ZoneDatabase) throws(WireProblem) -> AlertRequest {
        guard let object = value.objectValue else { throw WireProblem("a request is an object") }
        guard let id = object["id"]?.stringValue else { throw WireProblem("a request needs an id") }
        let trigger = try Self.trigger(object["trigger"], zones: zones)
        let content = try Self.content(object["content"])
        var style = AlertStyle.banner
        if let name = object["style"]?.stringValue {
            guard let named = AlertStyle(rawValue: name) else {
                throw WireProblem("style \(JSONValue.string(name).jsonText) is not banner or alert")
            }
            style = named
        }
        let grace = object["dropAfterSec"]?.doubleValue
        var late = LatePolicy.coalesce
        switch object["late"]?.stringValue {
        case nil, "coalesce"?: late = .coalesce
        case "deliver"?: late = .deliver
        case "dropAfter"?:
            guard let grace else { throw WireProblem("late dropAfter needs dropAfterSec, the grace period") }
            late = .dropAfter(try Self.duration(grace, "dropAfterSec"))
        case let name?:
            throw WireProblem("late \(JSONValue.string(name).jsonText) is not deliver, coalesce or dropAfter")
        }
        if grace != nil, case .dropAfter = late {} else if grace != nil {
            throw WireProblem("dropAfterSec is only for late dropAfter")
        }
        return AlertRequest(id: id, trigger: trigger, content: content, style: style, late: late)
    }

    private static func trigger(_ value: JSONValue?, zones: ZoneDatabase) throws(WireProblem) -> AlertTrigger {
        guard let object = value?.objectValue else { return .now }
        let repeats = object["repeats"]?.boolValue ?? false
        let given = ["at", "after", "calendar"].filter { object[$0] != nil && object[$0] != .null }
        guard given.count <= 1 else { throw WireProblem("a trigger takes one of at, after and calendar, not \(given.joined(separator: " and "))") }
        if let at = object["at"]?.doubleValue {
            guard !repeats else { throw WireProblem("an at trigger does not repeat; use calendar or after") }
            // From the epoch on: the scheduler measures how late an instant passed is in nanoseconds of an Int64,
            // which an instant long before 1970 overflows (at -8e9 is 9.8e18 ns before 2025).
            guard at.isFinite, at >= 0, at < 9e9 else {
                throw WireProblem("at \(at) is not an instant from 1970 on, in seconds since the epoch (less than 9e9)")
            }
            return .at(WallTime(nanoseconds: Int64((at * 1e9).rounded())))
        }
        if let after = object["after"]?.doubleValue {
            return .after(try Self.duration(after, "after"), repeats: repeats)
        }
        if let calendar = object["calendar"]?.objectValue {
            func component(_ name: String) -> Int? { calendar[name]?.intValue.map { Int(clamping: $0) } }
            let components = CalendarComponents(
                year: component("year"), month: component("month"), day: component("day"),
                weekday: component("weekday"), hour: component("hour"), minute: component("minute"),
                second: component("second")
            )
            var zone = CalendarZone.floating
            if let name = calendar["timeZone"]?.stringValue {
                do { zone = .zoned(try zones.rules(named: name)) } catch { throw WireProblem(error.description) }
            }
            return .calendar(components, zone: zone, repeats: repeats)
        }
        guard !repeats else { throw WireProblem("repeats needs a calendar or after trigger") }
        return .now
    }

    private static func duration(_ seconds: Double, _ name: String) throws(WireProblem) -> Duration {
        guard seconds.isFinite, abs(seconds) < 1e9 else { throw WireProblem("\(name) \(seconds) is not a number of seconds") }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    private static func content(_ value: JSONValue?) throws(WireProblem) -> AlertContent {
        guard let object = value?.objectValue, let title = object["title"]?.stringValue else {
            throw WireProblem("a request needs content with a title")
        }
        var buttons: [AlertButton] = []
        for action in object["actions"]?.arrayValue ?? [] {
            guard let action = action.objectValue, let id = action["id"]?.stringValue, let label = action["title"]?.stringValue else {
                throw WireProblem("an action needs an id and a title")
            }
            buttons.append(AlertButton(id: id, title: label, foreground: action["foreground"]?.boolValue ?? false))
        }
        var userInfo = "{}"
        if let info = object["userInfo"], info != .null {
            guard info.isObject else { throw WireProblem("userInfo is a JSON object") }
            userInfo = info.jsonText
        }
        return AlertContent(
            title: title,
            subtitle: object["subtitle"]?.stringValue ?? "",
            body: object["body"]?.stringValue ?? "",
            sound: object["sound"]?.stringValue,
            badge: object["badge"]?.intValue.map { Int(clamping: $0) },
            threadID: object["threadId"]?.stringValue,
            categoryID: object["categoryId"]?.stringValue,
            actions: buttons,
            userInfo: userInfo
        )
    }

    static func json(_ request: AlertRequest) -> JSONValue {
        var object: JSONObject = ["id": .string(request.id), "content": self.json(request.content), "style": .string(request.style.rawValue)]
        switch request.trigger {
        case .now: break
        case .at(let date): object["trigger"] = ["at": self.seconds(date)]
        case .after(let interval, let repeats):
            object["trigger"] = ["after": .double(interval.seconds), "repeats": .bool(repeats)]
        case .calendar(let components, let zone, let repeats):
            var calendar: JSONObject = [:]
            let fields: [(String, Int?)] = [
                ("year", components.year), ("month", components.month), ("day", components.day),
                ("weekday", components.weekday), ("hour", components.hour), ("minute", components.minute),
                ("second", components.second),
            ]
            for (name, value) in fields { if let value { calendar[name] = .int(Int64(value)) } }
            if case .zoned(let rules) = zone { calendar["timeZone"] = .string(rules.name) }
            object["trigger"] = ["calendar": .object(calendar), "repeats": .bool(repeats)]
        }
        switch request.late {
        case .deliver: object["late"] = "deliver"
        case .coalesce: object["late"] = "coalesce"
        case .dropAfter(let grace):
            object["late"] = "dropAfter"
            object["dropAfterSec"] = .double(grace.seconds)
        }
        return .object(object)
    }

    static func json(_ content: AlertContent) -> JSONValue {
        var object: JSONObject = ["title": .string(content.title), "subtitle": .string(content.subtitle), "body": .string(content.body)]
        if let sound = content.sound { object["sound"] = .string(sound) }
        if let badge = content.badge { object["badge"] = .int(Int64(badge)) }
        if let thread = content.threadID { object["threadId"] = .string(thread) }
        if let category = content.categoryID { object["categoryId"] = .string(category) }
        object["actions"] = .array(
            content.actions.map { ["id": .string($0.id), "title": .string($0.title), "foreground": .bool($0.foreground)] }
        )
        object["userInfo"] = (try? JSONParser.parse(content.userInfo)) ?? .object([:])
        return .object(object)
    }

    static func seconds(_ date: WallTime) -> JSONValue { .double(Double(date.nanoseconds) / 1e9) }

    /// A presentation as the delivered list, agents and the app's willPresent event carry it.
    static func json(_ presentation: AlertPresentation, serial: Int64) -> JSONObject {
        [
            "app": .string(presentation.app.value), "id": .string(presentation.id), "serial": .int(serial),
            "content": self.json(presentation.content), "style": .string(presentation.style.rawValue),
            "date": self.seconds(presentation.date), "count": .int(Int64(presentation.count)),
            "late": .bool(presentation.late),
        ]
    }

    /// A pending request's record as the store keeps it: the request, and the instants in whole nanoseconds.
    static func storeText(_ record: AlertRecord) -> String {
        var object: JSONObject = [
            "request": self.json(record.request), "since": .int(record.since.nanoseconds), "fires": .int(Int64(record.fires)),
        ]
        if let last = record.lastFire { object["lastFire"] = .int(last.nanoseconds) }
        if let due = record.intervalDue { object["intervalDue"] = .int(due.nanoseconds) }
        return JSONValue.object(object).jsonText
    }

    /// A record the store kept.
    /// - Throws: why it cannot be read back (the store is damaged, or a zone it names is gone).
    static func record(_ text: String, app: AppName, zones: ZoneDatabase) throws(WireProblem) -> AlertRecord {
        let value: JSONValue
        do { value = try JSONParser.parse(text) } catch { throw WireProblem(error.description) }
        guard let object = value.objectValue, let request = object["request"], let since = object["since"]?.intValue,
            let fires = object["fires"]?.intValue
        else { throw WireProblem("a stored request lacks request, since or fires") }
        let parsed = try Self.request(request, zones: zones)
        // Only what Schedule takes: a damaged row would otherwise stop the scheduler (a repeating interval of 0 has
        // no end of fires, an instant long before 1970 overflows its arithmetic). A control character in a name is
        // an older daemon's request, taken up as it was.
        do throws(AlertError) {
            try parsed.validate()
        } catch {
            if case .controlCharacter = error {} else { throw WireProblem("the stored request is not one Schedule takes: \(error)") }
        }
        guard fires >= 0, fires < 1 << 40 else { throw WireProblem("a stored request has fired \(fires) times") }
        func instant(_ name: String, _ nanoseconds: Int64) throws(WireProblem) -> WallTime {
            guard nanoseconds >= 0, nanoseconds < 9_000_000_000_000_000_000 else {
                throw WireProblem("the stored \(name) \(nanoseconds) ns is not an instant from 1970 on")
            }
            return WallTime(nanoseconds: nanoseconds)
        }
        return AlertRecord(
            key: AlertKey(app: app, id: parsed.id), request: parsed, since: try instant("since", since),
            lastFire: try object["lastFire"]?.intValue.map { nanoseconds throws(WireProblem) in try instant("lastFire", nanoseconds) },
            fires: Int(fires),
            intervalDue: try object["intervalDue"]?.intValue.map { nanoseconds throws(WireProblem) in try instant("intervalDue", nanoseconds) }
        )
    }
}

/// Why a request's JSON is not one, said for the person who sent it.
struct WireProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
