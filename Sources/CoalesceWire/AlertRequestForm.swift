public import CoalesceCore
public import Varlink

/// A notification request as io.coalesced.Notifications' `Request` writes it, in one form for the client library's
/// Schedule, coalescectl's `notify schedule`, and the daemon's replies and store: an instant in seconds since the
/// epoch, a calendar's zone by name. The daemon resolves both into an ``AlertRequest``; an app and coalescectl only
/// name them.
public struct AlertRequestForm: Sendable, Hashable {
    /// When a request fires, as the interface writes it.
    public enum Trigger: Sendable, Hashable {
        /// At once: the request has no trigger.
        case now
        /// At an instant, in seconds since the Unix epoch.
        case at(seconds: Double)
        case after(Duration, repeats: Bool)
        /// At the dates the components match, in the zone of this name, or in floating local time (`nil`).
        case calendar(CalendarComponents, timeZone: String?, repeats: Bool)
    }

    public var id: String
    public var trigger: Trigger
    public var content: AlertContent
    public var style: AlertStyle
    public var late: LatePolicy

    public init(id: String, trigger: Trigger, content: AlertContent, style: AlertStyle, late: LatePolicy) {
        self.id = id
        self.trigger = trigger
        self.content = content
        self.style = style
        self.late = late
    }

    /// The latest instant a trigger takes, in seconds since the epoch: the scheduler measures how late an instant
    /// passed is in nanoseconds of an Int64, which an instant long before 1970 overflows too (at -8e9 is 9.8e18 ns
    /// before 2025).
    public static let latestInstant = 9e9

    /// The request's members: `id`, `content`, `style`, then `trigger` unless it fires at once, `late`, and
    /// `dropAfterSec` for ``LatePolicy/dropAfter(_:)``.
    /// - Parameter compact: leaves out the content's members that say nothing (an empty subtitle, body or list of
    ///   actions), as an app's Schedule sends it; the daemon writes every one.
    public func wire(compact: Bool = false) -> JSONValue {
        var object: JSONObject = [
            "id": .string(self.id), "content": self.content.wire(compact: compact), "style": .string(self.style.rawValue),
        ]
        switch self.trigger {
        case .now: break
        case .at(let seconds): object["trigger"] = ["at": .double(seconds)]
        case .after(let interval, let repeats):
            object["trigger"] = ["after": .double(Self.seconds(interval)), "repeats": .bool(repeats)]
        case .calendar(let components, let zone, let repeats):
            var calendar: JSONObject = [:]
            let fields: [(String, Int?)] = [
                ("year", components.year), ("month", components.month), ("day", components.day),
                ("weekday", components.weekday), ("hour", components.hour), ("minute", components.minute),
                ("second", components.second),
            ]
            for (name, value) in fields { if let value { calendar[name] = .int(Int64(value)) } }
            if let zone { calendar["timeZone"] = .string(zone) }
            object["trigger"] = ["calendar": .object(calendar), "repeats": .bool(repeats)]
        }
        switch self.late {
        case .deliver: object["late"] = "deliver"
        case .coalesce: object["late"] = "coalesce"
        case .dropAfter(let grace):
            object["late"] = "dropAfter"
            object["dropAfterSec"] = .double(Self.seconds(grace))
        }
        return .object(object)
    }

    /// Reads a request as a client sent it or the store kept it, or says why it is not one.
    /// - Parameter zone: called with a calendar trigger's zone name when it is read, so that a zone the reader
    ///   cannot resolve is refused in its turn among the members.
    /// - Throws: the reason, for the person who sent it.
    public static func reading(
        wire value: JSONValue,
        zone: (String) throws(WireFormError) -> Void = { _ in }
    ) throws(WireFormError) -> AlertRequestForm {
        guard let object = value.objectValue else { throw WireFormError("a request is an object") }
        guard let id = object["id"]?.stringValue else { throw WireFormError("a request needs an id") }
        let trigger = try Self.trigger(object["trigger"], zone: zone)
        let content = try AlertContent.reading(wire: object["content"])
        var style = AlertStyle.banner
        if let name = object["style"]?.stringValue {
            guard let named = AlertStyle(rawValue: name) else {
                throw WireFormError("style \(JSONValue.string(name).jsonText) is not banner or alert")
            }
            style = named
        }
        let grace = object["dropAfterSec"]?.doubleValue
        var late = LatePolicy.coalesce
        switch object["late"]?.stringValue {
        case nil, "coalesce"?: late = .coalesce
        case "deliver"?: late = .deliver
        case "dropAfter"?:
            guard let grace else { throw WireFormError("late dropAfter needs dropAfterSec, the grace period") }
            late = .dropAfter(try Self.duration(grace, "dropAfterSec"))
        case let name?:
            throw WireFormError("late \(JSONValue.string(name).jsonText) is not deliver, coalesce or dropAfter")
        }
        if grace != nil, case .dropAfter = late {} else if grace != nil {
            throw WireFormError("dropAfterSec is only for late dropAfter")
        }
        return AlertRequestForm(id: id, trigger: trigger, content: content, style: style, late: late)
    }

    private static func trigger(
        _ value: JSONValue?,
        zone: (String) throws(WireFormError) -> Void
    ) throws(WireFormError) -> Trigger {
        guard let object = value?.objectValue else { return .now }
        let repeats = object["repeats"]?.boolValue ?? false
        let given = ["at", "after", "calendar"].filter { object[$0] != nil && object[$0] != .null }
        guard given.count <= 1 else {
            throw WireFormError("a trigger takes one of at, after and calendar, not \(given.joined(separator: " and "))")
        }
        if let at = object["at"]?.doubleValue {
            guard !repeats else { throw WireFormError("an at trigger does not repeat; use calendar or after") }
            guard at.isFinite, at >= 0, at < Self.latestInstant else {
                throw WireFormError("at \(at) is not an instant from 1970 on, in seconds since the epoch (less than 9e9)")
            }
            return .at(seconds: at)
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
            let name = calendar["timeZone"]?.stringValue
            if let name { try zone(name) }
            return .calendar(components, timeZone: name, repeats: repeats)
        }
        guard !repeats else { throw WireFormError("repeats needs a calendar or after trigger") }
        return .now
    }

    /// A number of seconds as the interface carries an interval or a grace period, read into a `Duration`.
    /// - Parameter name: the member it came in, for the reason it is refused.
    /// - Throws: when it is not finite, or a billion seconds or more either way.
    public static func duration(_ seconds: Double, _ name: String) throws(WireFormError) -> Duration {
        guard seconds.isFinite, abs(seconds) < 1e9 else { throw WireFormError("\(name) \(seconds) is not a number of seconds") }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// A `Duration` as the interface carries intervals: seconds, with the fraction.
    public static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension AlertContent {
    /// The interface's `Content`: `title`, `subtitle`, `body`, then `sound`, `badge`, `threadId` and `categoryId`
    /// when set, `actions`, and `userInfo` (`{}` when ``userInfo`` is not JSON text).
    /// - Parameter compact: leaves out an empty subtitle, body and list of actions.
    public func wire(compact: Bool = false) -> JSONValue {
        var object: JSONObject = ["title": .string(self.title)]
        if !compact || !self.subtitle.isEmpty { object["subtitle"] = .string(self.subtitle) }
        if !compact || !self.body.isEmpty { object["body"] = .string(self.body) }
        if let sound = self.sound { object["sound"] = .string(sound) }
        if let badge = self.badge { object["badge"] = .int(Int64(badge)) }
        if let thread = self.threadID { object["threadId"] = .string(thread) }
        if let category = self.categoryID { object["categoryId"] = .string(category) }
        if !compact || !self.actions.isEmpty {
            object["actions"] = .array(
                self.actions.map { ["id": .string($0.id), "title": .string($0.title), "foreground": .bool($0.foreground)] }
            )
        }
        // The daemon checked the user info when it took the request, and an app's library before it sent it.
        object["userInfo"] = (try? JSONParser.parse(self.userInfo)) ?? .object([:])
        return .object(object)
    }

    /// Reads the interface's `Content`, or says why it is not one: it needs a title, and each action an id and a
    /// title; `userInfo` is an object when it is there.
    public static func reading(wire value: JSONValue?) throws(WireFormError) -> AlertContent {
        guard let object = value?.objectValue, let title = object["title"]?.stringValue else {
            throw WireFormError("a request needs content with a title")
        }
        var buttons: [AlertButton] = []
        for action in object["actions"]?.arrayValue ?? [] {
            guard let action = action.objectValue, let id = action["id"]?.stringValue, let label = action["title"]?.stringValue else {
                throw WireFormError("an action needs an id and a title")
            }
            buttons.append(AlertButton(id: id, title: label, foreground: action["foreground"]?.boolValue ?? false))
        }
        var userInfo = "{}"
        if let info = object["userInfo"], info != .null {
            guard info.isObject else { throw WireFormError("userInfo is a JSON object") }
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
}
