import Varlink

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A local notification the app schedules: `io.coalesced.Notifications`' `Request`.
///
/// ```swift
/// var content = NotificationContent(title: "Water the plants", actions: [NotificationAction(id: "done", title: "Done")])
/// try content.setUserInfo(["plant": "fern"])
/// let next = try await app.schedule(NotificationRequest(id: "water", trigger: .after(.seconds(3600)), content: content))
/// ```
public struct NotificationRequest: Sendable, Hashable {
    /// Names the request within the app: scheduling an id again replaces the pending request whole.
    public var id: String
    public var trigger: NotificationTrigger
    public var content: NotificationContent
    public var style: NotificationStyle
    /// What becomes of fires missed while the machine slept, the daemon was down or the clock was set past them.
    public var late: LatePolicy

    public init(
        id: String,
        trigger: NotificationTrigger = .now,
        content: NotificationContent,
        style: NotificationStyle = .banner,
        late: LatePolicy = .coalesce
    ) {
        self.id = id
        self.trigger = trigger
        self.content = content
        self.style = style
        self.late = late
    }
}

/// When a request fires.
public enum NotificationTrigger: Sendable, Hashable {
    /// At once.
    case now
    /// At an instant; one in the past fires at once, late by as much.
    case at(Date)
    /// After an interval on the boot-time clock (time asleep counts); a repeating one fires every interval, which
    /// is then at least 60 seconds.
    case after(Duration, repeats: Bool = false)
    /// At the dates the components match, the first of them or every one.
    case calendar(NotificationCalendar, repeats: Bool = false)

    /// ``after(_:repeats:)`` in seconds.
    public static func after(seconds: Double, repeats: Bool = false) -> NotificationTrigger {
        .after(.nanoseconds(Int64((seconds * 1e9).rounded())), repeats: repeats)
    }
}

/// Calendar components and the dates they match, as `DateComponents` hold them.
///
/// Any subset of the components, at least one. A component left out above the smallest one given matches any
/// value; one left out below it is its first value: `NotificationCalendar(hour: 8, minute: 30)` is every day at
/// 08:30:00. Weekdays count 1 = Sunday … 7 = Saturday. Dates that do not exist (31 April, 29 February of most
/// years) are skipped.
public struct NotificationCalendar: Sendable, Hashable {
    public var year: Int?
    public var month: Int?
    public var day: Int?
    public var weekday: Int?
    public var hour: Int?
    public var minute: Int?
    public var second: Int?
    /// A time zone name of the tz database (`Europe/Berlin`); `nil` is floating local time, read in the machine's
    /// zone whatever it is when the date comes.
    public var timeZone: String?

    public init(
        year: Int? = nil,
        month: Int? = nil,
        day: Int? = nil,
        weekday: Int? = nil,
        hour: Int? = nil,
        minute: Int? = nil,
        second: Int? = nil,
        timeZone: String? = nil
    ) {
        self.year = year
        self.month = month
        self.day = day
        self.weekday = weekday
        self.hour = hour
        self.minute = minute
        self.second = second
        self.timeZone = timeZone
    }
}

/// How a presentation shows.
public enum NotificationStyle: String, Sendable, Hashable, CaseIterable {
    /// Shown without interrupting the app on screen. The default.
    case banner
    /// Shown over the active app, which gets willResignActive until it is answered, then didBecomeActive.
    case alert
}

/// What becomes of fires missed (while the machine slept, the daemon was down or the clock was set past them).
public enum LatePolicy: Sendable, Hashable {
    /// Each is presented, marked late.
    case deliver
    /// One presentation per app and thread, with the count. The default.
    case coalesce
    /// Dropped when later than the grace period, presented late within it.
    case dropAfter(Duration)
}

/// A button a presentation offers.
public struct NotificationAction: Sendable, Hashable {
    /// What the response's action is for this button; not `default` or `dismiss`.
    public var id: String
    /// The button's label.
    public var title: String
    /// Whether answering with it brings the app to the foreground (launching it there when it is not running);
    /// otherwise it is launched into the background.
    public var foreground: Bool

    public init(id: String, title: String, foreground: Bool = false) {
        self.id = id
        self.title = title
        self.foreground = foreground
    }
}

/// What a notification shows.
public struct NotificationContent: Sendable, Hashable {
    public var title: String
    /// Empty: none.
    public var subtitle: String
    /// Empty: none.
    public var body: String
    /// A sound's name; `nil`: silent.
    public var sound: String?
    /// The app's badge once presented: 0 clears it; `nil` leaves it as it is.
    public var badge: Int?
    /// Notifications of one thread are grouped on the desktop, and missed ones coalesced together.
    public var threadID: String?
    public var categoryID: String?
    /// The buttons it offers, at most 8.
    public var actions: [NotificationAction]
    /// Handed back as it is with each response: the text of a JSON object. ``setUserInfo(_:)`` encodes any
    /// `Encodable` into it, ``decodeUserInfo(_:)`` reads it.
    public var userInfoJSON: String

    public init(
        title: String,
        subtitle: String = "",
        body: String = "",
        sound: String? = nil,
        badge: Int? = nil,
        threadID: String? = nil,
        categoryID: String? = nil,
        actions: [NotificationAction] = [],
        userInfoJSON: String = "{}"
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
        self.badge = badge
        self.threadID = threadID
        self.categoryID = categoryID
        self.actions = actions
        self.userInfoJSON = userInfoJSON
    }

    /// Sets ``userInfoJSON`` to `value` encoded with a `JSONEncoder`.
    /// - Throws: ``CoalescedError/invalidPayload(kind:reason:)`` (kind `userInfo`) when it does not encode to a JSON
    ///   object.
    public mutating func setUserInfo(_ value: some Encodable) throws(CoalescedError) {
        self.userInfoJSON = JSONValue.object(try payloadObject(value, kind: "userInfo")).jsonText
    }

    /// ``userInfoJSON`` read into `type` with a `JSONDecoder`.
    public func decodeUserInfo<Info: Decodable>(_ type: Info.Type = Info.self) throws(CoalescedError) -> Info {
        try decodeJSON(self.userInfoJSON, as: type, what: "userInfo")
    }
}

/// A request waiting to fire, with its next date.
public struct PendingNotification: Sendable, Hashable {
    public var request: NotificationRequest
    /// When it fires next.
    public var next: Date
    /// When it last fired, if it did (a repeating request).
    public var lastFire: Date?
    /// A calendar trigger as systemd's `OnCalendar=` writes it, with the components left out spelled as they are
    /// read: `Mon *-*-* 08:30:00 Europe/Berlin`.
    public var calendar: String?

    public init(request: NotificationRequest, next: Date, lastFire: Date? = nil, calendar: String? = nil) {
        self.request = request
        self.next = next
        self.lastFire = lastFire
        self.calendar = calendar
    }
}

/// One presentation: a fire, or missed fires coalesced. The app receives it as ``Delivery/willPresent(_:)`` while
/// it is active, and finds it in its delivered list (``CoalescedApp/deliveredNotifications()``).
public struct NotificationPresentation: Sendable, Hashable {
    public var app: String
    /// The request's id.
    public var id: String
    /// Its number in the app's delivered list.
    public var serial: Int
    public var content: NotificationContent
    public var style: NotificationStyle
    /// The date of the (latest) fire it stands for.
    public var date: Date
    /// How many fires it stands for (more than 1 for missed fires coalesced).
    public var count: Int
    /// Whether it is presented after its date was missed.
    public var late: Bool

    public init(
        app: String,
        id: String,
        serial: Int,
        content: NotificationContent,
        style: NotificationStyle,
        date: Date,
        count: Int = 1,
        late: Bool = false
    ) {
        self.app = app
        self.id = id
        self.serial = serial
        self.content = content
        self.style = style
        self.date = date
        self.count = count
        self.late = late
    }
}

/// The app's delivered list.
public struct DeliveredNotifications: Sendable, Hashable {
    /// Oldest first.
    public var presentations: [NotificationPresentation]
    /// How many entries went out of the list for room (`MaxDelivered=`) since it was last emptied.
    public var dropped: Int

    public init(presentations: [NotificationPresentation], dropped: Int = 0) {
        self.presentations = presentations
        self.dropped = dropped
    }
}

/// The user's answer to a presentation: ``Delivery/didReceiveResponse(_:)``.
public struct NotificationResponse: Sendable, Hashable {
    /// What the user did.
    public enum Action: Sendable, Hashable, CustomStringConvertible {
        /// Opened the notification.
        case `default`
        /// Dismissed it.
        case dismiss
        /// Chose the action (button) of this id.
        case custom(String)

        public init(_ name: String) {
            switch name {
            case "default": self = .default
            case "dismiss": self = .dismiss
            default: self = .custom(name)
            }
        }

        /// As Respond names it: `default`, `dismiss` or the action's id.
        public var description: String {
            switch self {
            case .default: return "default"
            case .dismiss: return "dismiss"
            case .custom(let id): return id
            }
        }
    }

    /// The request's id.
    public var id: String
    public var action: Action
    /// What the user typed, if anything.
    public var text: String?
    /// The content's ``NotificationContent/userInfoJSON``, handed back as it was scheduled.
    public var userInfoJSON: String

    public init(id: String, action: Action, text: String? = nil, userInfoJSON: String = "{}") {
        self.id = id
        self.action = action
        self.text = text
        self.userInfoJSON = userInfoJSON
    }

    /// ``userInfoJSON`` read into `type` with a `JSONDecoder`.
    public func decodeUserInfo<Info: Decodable>(_ type: Info.Type = Info.self) throws(CoalescedError) -> Info {
        try decodeJSON(self.userInfoJSON, as: type, what: "userInfo")
    }
}

// MARK: Wire

/// Reads JSON text into a `Decodable` type.
func decodeJSON<Value: Decodable>(_ text: String, as type: Value.Type, what: String) throws(CoalescedError) -> Value {
    do {
        return try JSONDecoder().decode(type, from: Data(text.utf8))
    } catch {
        throw .invalidPayload(kind: what, reason: "does not decode as \(Value.self): \(error)")
    }
}

/// Seconds since the Unix epoch as the interface carries them.
private func seconds(_ duration: Duration) -> Double {
    let (whole, fraction) = duration.components
    return Double(whole) + Double(fraction) / 1e18
}

private func duration(_ seconds: Double) -> Duration {
    .nanoseconds(Int64((seconds * 1e9).rounded()))
}

/// A reply the library cannot read: what it lacks.
struct NotificationWireError: Error {
    var reason: String
}

extension NotificationRequest {
    /// `Request` as Schedule takes it.
    func wire() throws(CoalescedError) -> JSONValue {
        var object: JSONObject = [
            "id": .string(self.id), "content": try self.content.wire(), "style": .string(self.style.rawValue),
        ]
        switch self.trigger {
        case .now: break
        case .at(let date): object["trigger"] = ["at": .double(date.timeIntervalSince1970)]
        case .after(let interval, let repeats):
            object["trigger"] = ["after": .double(seconds(interval)), "repeats": .bool(repeats)]
        case .calendar(let calendar, let repeats):
            var components: JSONObject = [:]
            let fields: [(String, Int?)] = [
                ("year", calendar.year), ("month", calendar.month), ("day", calendar.day), ("weekday", calendar.weekday),
                ("hour", calendar.hour), ("minute", calendar.minute), ("second", calendar.second),
            ]
            for (name, value) in fields { if let value { components[name] = .int(Int64(value)) } }
            if let zone = calendar.timeZone { components["timeZone"] = .string(zone) }
            object["trigger"] = ["calendar": .object(components), "repeats": .bool(repeats)]
        }
        switch self.late {
        case .deliver: object["late"] = "deliver"
        case .coalesce: object["late"] = "coalesce"
        case .dropAfter(let grace):
            object["late"] = "dropAfter"
            object["dropAfterSec"] = .double(seconds(grace))
        }
        return .object(object)
    }

    init(wire value: JSONValue) throws(NotificationWireError) {
        guard let object = value.objectValue, let id = object["id"]?.stringValue, let content = object["content"] else {
            throw NotificationWireError(reason: "a request without id or content")
        }
        self.id = id
        self.content = try NotificationContent(wire: content)
        self.style = object["style"]?.stringValue.flatMap(NotificationStyle.init(rawValue:)) ?? .banner
        switch object["late"]?.stringValue {
        case "deliver"?: self.late = .deliver
        case "dropAfter"?: self.late = .dropAfter(duration(object["dropAfterSec"]?.doubleValue ?? 0))
        default: self.late = .coalesce
        }
        self.trigger = .now
        guard let trigger = object["trigger"]?.objectValue else { return }
        let repeats = trigger["repeats"]?.boolValue ?? false
        if let at = trigger["at"]?.doubleValue {
            self.trigger = .at(Date(timeIntervalSince1970: at))
        } else if let after = trigger["after"]?.doubleValue {
            self.trigger = .after(duration(after), repeats: repeats)
        } else if let calendar = trigger["calendar"]?.objectValue {
            func component(_ name: String) -> Int? { calendar[name]?.intValue.map { Int(clamping: $0) } }
            self.trigger = .calendar(
                NotificationCalendar(
                    year: component("year"), month: component("month"), day: component("day"),
                    weekday: component("weekday"), hour: component("hour"), minute: component("minute"),
                    second: component("second"), timeZone: calendar["timeZone"]?.stringValue
                ),
                repeats: repeats
            )
        }
    }
}

extension NotificationContent {
    func wire() throws(CoalescedError) -> JSONValue {
        var object: JSONObject = ["title": .string(self.title)]
        if !self.subtitle.isEmpty { object["subtitle"] = .string(self.subtitle) }
        if !self.body.isEmpty { object["body"] = .string(self.body) }
        if let sound = self.sound { object["sound"] = .string(sound) }
        if let badge = self.badge { object["badge"] = .int(Int64(badge)) }
        if let thread = self.threadID { object["threadId"] = .string(thread) }
        if let category = self.categoryID { object["categoryId"] = .string(category) }
        if !self.actions.isEmpty {
            object["actions"] = .array(
                self.actions.map { action -> JSONValue in
                    ["id": .string(action.id), "title": .string(action.title), "foreground": .bool(action.foreground)]
                }
            )
        }
        let userInfo: JSONValue
        do {
            userInfo = try JSONParser.parse(self.userInfoJSON)
        } catch {
            throw .invalidPayload(kind: "userInfo", reason: "is not JSON: \(error)")
        }
        guard userInfo.objectValue != nil else {
            throw .invalidPayload(kind: "userInfo", reason: "userInfo is a JSON object, not \(self.userInfoJSON)")
        }
        object["userInfo"] = userInfo
        return .object(object)
    }

    init(wire value: JSONValue) throws(NotificationWireError) {
        guard let object = value.objectValue, let title = object["title"]?.stringValue else {
            throw NotificationWireError(reason: "content without a title")
        }
        self.init(
            title: title,
            subtitle: object["subtitle"]?.stringValue ?? "",
            body: object["body"]?.stringValue ?? "",
            sound: object["sound"]?.stringValue,
            badge: object["badge"]?.intValue.map { Int(clamping: $0) },
            threadID: object["threadId"]?.stringValue,
            categoryID: object["categoryId"]?.stringValue,
            actions: (object["actions"]?.arrayValue ?? []).compactMap { action -> NotificationAction? in
                guard let id = action["id"]?.stringValue else { return nil }
                let foreground = action["foreground"]?.boolValue ?? false
                return NotificationAction(id: id, title: action["title"]?.stringValue ?? id, foreground: foreground)
            },
            userInfoJSON: userInfoText(object["userInfo"])
        )
    }
}

/// A userInfo member as JSON text: `{}` when it is absent.
private func userInfoText(_ value: JSONValue?) -> String {
    guard let value, value.resolved != .null else { return "{}" }
    return value.jsonText
}

extension PendingNotification {
    init(wire value: JSONValue) throws(NotificationWireError) {
        guard let request = value["request"], let next = value["next"]?.doubleValue else {
            throw NotificationWireError(reason: "a pending entry without request or next")
        }
        self.init(
            request: try NotificationRequest(wire: request),
            next: Date(timeIntervalSince1970: next),
            lastFire: value["lastFire"]?.doubleValue.map { Date(timeIntervalSince1970: $0) },
            calendar: value["calendar"]?.stringValue
        )
    }
}

extension NotificationPresentation {
    init(wire value: JSONValue) throws(NotificationWireError) {
        guard let app = value["app"]?.stringValue, let id = value["id"]?.stringValue,
            let serial = value["serial"]?.intValue, let content = value["content"], let date = value["date"]?.doubleValue
        else { throw NotificationWireError(reason: "a presentation without app, id, serial, content or date") }
        self.init(
            app: app,
            id: id,
            serial: Int(serial),
            content: try NotificationContent(wire: content),
            style: value["style"]?.stringValue.flatMap(NotificationStyle.init(rawValue:)) ?? .banner,
            date: Date(timeIntervalSince1970: date),
            count: value["count"]?.intValue.map { Int($0) } ?? 1,
            late: value["late"]?.boolValue ?? false
        )
    }
}

extension NotificationResponse {
    init(wire value: JSONValue) throws(NotificationWireError) {
        guard let id = value["id"]?.stringValue, let action = value["action"]?.stringValue else {
            throw NotificationWireError(reason: "a response without id or action")
        }
        let userInfo = userInfoText(value["userInfo"])
        self.init(id: id, action: Action(action), text: value["text"]?.stringValue, userInfoJSON: userInfo)
    }
}
