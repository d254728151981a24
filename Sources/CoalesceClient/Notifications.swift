import CoalesceCore
import CoalesceWire
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
    /// The request as the interface writes it, which the daemon and coalescectl share: an instant is kept as the
    /// interface carries it, in seconds since the epoch.
    var form: AlertRequestForm

    public init(
        id: String,
        trigger: NotificationTrigger = .now,
        content: NotificationContent,
        style: NotificationStyle = .banner,
        late: LatePolicy = .coalesce
    ) {
        self.form = AlertRequestForm(id: id, trigger: trigger.form, content: content, style: style, late: late)
    }

    init(_ form: AlertRequestForm) {
        self.form = form
    }

    /// Names the request within the app: scheduling an id again replaces the pending request whole.
    public var id: String {
        get { self.form.id }
        set { self.form.id = newValue }
    }

    public var trigger: NotificationTrigger {
        get { NotificationTrigger(self.form.trigger) }
        set { self.form.trigger = newValue.form }
    }

    public var content: NotificationContent {
        get { self.form.content }
        set { self.form.content = newValue }
    }

    public var style: NotificationStyle {
        get { self.form.style }
        set { self.form.style = newValue }
    }

    /// What becomes of fires missed while the machine slept, the daemon was down or the clock was set past them.
    public var late: LatePolicy {
        get { self.form.late }
        set { self.form.late = newValue }
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

    /// The trigger the interface carries, with its instant as a `Date`.
    init(_ form: AlertRequestForm.Trigger) {
        switch form {
        case .now: self = .now
        case .at(let seconds): self = .at(Date(timeIntervalSince1970: seconds))
        case .after(let interval, let repeats): self = .after(interval, repeats: repeats)
        case .calendar(let components, let zone, let repeats):
            self = .calendar(NotificationCalendar(components, timeZone: zone), repeats: repeats)
        }
    }

    /// The trigger as the interface carries it: its instant in seconds since the epoch.
    var form: AlertRequestForm.Trigger {
        switch self {
        case .now: .now
        case .at(let date): .at(seconds: date.timeIntervalSince1970)
        case .after(let interval, let repeats): .after(interval, repeats: repeats)
        case .calendar(let calendar, let repeats): .calendar(calendar.components, timeZone: calendar.timeZone, repeats: repeats)
        }
    }
}

/// Calendar components and the dates they match, as `DateComponents` hold them.
///
/// Any subset of the components, at least one. A component left out above the smallest one given matches any
/// value; one left out below it is its first value: `NotificationCalendar(hour: 8, minute: 30)` is every day at
/// 08:30:00. Weekdays count 1 = Sunday … 7 = Saturday. Dates that do not exist (31 April, 29 February of most
/// years) are skipped.
public struct NotificationCalendar: Sendable, Hashable {
    /// The components, as the daemon's scheduler reads them.
    var components: CalendarComponents
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
        self.components = CalendarComponents(
            year: year, month: month, day: day, weekday: weekday, hour: hour, minute: minute, second: second
        )
        self.timeZone = timeZone
    }

    init(_ components: CalendarComponents, timeZone: String?) {
        self.components = components
        self.timeZone = timeZone
    }

    public var year: Int? {
        get { self.components.year }
        set { self.components.year = newValue }
    }
    public var month: Int? {
        get { self.components.month }
        set { self.components.month = newValue }
    }
    public var day: Int? {
        get { self.components.day }
        set { self.components.day = newValue }
    }
    public var weekday: Int? {
        get { self.components.weekday }
        set { self.components.weekday = newValue }
    }
    public var hour: Int? {
        get { self.components.hour }
        set { self.components.hour = newValue }
    }
    public var minute: Int? {
        get { self.components.minute }
        set { self.components.minute = newValue }
    }
    public var second: Int? {
        get { self.components.second }
        set { self.components.second = newValue }
    }
}

extension NotificationContent {
    /// What a notification shows, with its user info given as `userInfoJSON`: the text of a JSON object, handed
    /// back as it is with each response.
    public init(
        title: String,
        subtitle: String = "",
        body: String = "",
        sound: String? = nil,
        badge: Int? = nil,
        threadID: String? = nil,
        categoryID: String? = nil,
        actions: [NotificationAction] = [],
        userInfoJSON: String
    ) {
        self.init(
            title: title, subtitle: subtitle, body: body, sound: sound, badge: badge, threadID: threadID,
            categoryID: categoryID, actions: actions, userInfo: userInfoJSON
        )
    }

    /// Handed back as it is with each response: the text of a JSON object (`userInfo`). `setUserInfo(_:)` encodes
    /// any `Encodable` into it, `decodeUserInfo(_:)` reads it.
    public var userInfoJSON: String {
        get { self.userInfo }
        set { self.userInfo = newValue }
    }

    /// Sets the user info to `value` encoded with a `JSONEncoder`.
    /// - Parameter value: what to hand back with each response; it encodes to a JSON object.
    /// - Throws: ``CoalescedError/invalidPayload(kind:reason:)`` (kind `userInfo`) when it does not encode to a JSON
    ///   object.
    public mutating func setUserInfo(_ value: some Encodable) throws(CoalescedError) {
        self.userInfo = JSONValue.object(try payloadObject(value, kind: "userInfo")).jsonText
    }

    /// The user info read into `type` with a `JSONDecoder`.
    /// - Parameter type: what it decodes as.
    /// - Throws: ``CoalescedError/invalidPayload(kind:reason:)`` (kind `userInfo`) when it does not decode.
    public func decodeUserInfo<Info: Decodable>(_ type: Info.Type = Info.self) throws(CoalescedError) -> Info {
        try decodeJSON(self.userInfo, as: type, what: "userInfo")
    }
}

/// A request waiting to fire, with its next date.
public struct PendingNotification: Sendable, Hashable {
    /// The entry as ListPending answers it, which coalescectl reads too.
    var form: AlertPendingForm

    public init(request: NotificationRequest, next: Date, lastFire: Date? = nil, calendar: String? = nil) {
        self.form = AlertPendingForm(
            request: request.form, next: next.timeIntervalSince1970, lastFire: lastFire?.timeIntervalSince1970,
            calendar: calendar
        )
    }

    init(_ form: AlertPendingForm) {
        self.form = form
    }

    public var request: NotificationRequest {
        get { NotificationRequest(self.form.request) }
        set { self.form.request = newValue.form }
    }

    /// When it fires next.
    public var next: Date {
        get { Date(timeIntervalSince1970: self.form.next) }
        set { self.form.next = newValue.timeIntervalSince1970 }
    }

    /// When it last fired, if it did (a repeating request).
    public var lastFire: Date? {
        get { self.form.lastFire.map { Date(timeIntervalSince1970: $0) } }
        set { self.form.lastFire = newValue?.timeIntervalSince1970 }
    }

    /// A calendar trigger as systemd's `OnCalendar=` writes it, with the components left out spelled as they are
    /// read: `Mon *-*-* 08:30:00 Europe/Berlin`.
    public var calendar: String? {
        get { self.form.calendar }
        set { self.form.calendar = newValue }
    }
}

/// One presentation: a fire, or missed fires coalesced. The app receives it as ``Delivery/willPresent(_:)`` while
/// it is active, and finds it in its delivered list (``CoalescedApp/deliveredNotifications()``).
public struct NotificationPresentation: Sendable, Hashable {
    /// The presentation as the interface writes it, which the daemon and the desktop agent share.
    var form: AlertPresentationForm

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
        self.form = AlertPresentationForm(
            app: app, id: id, serial: Int64(serial), content: content, style: style, date: date.timeIntervalSince1970,
            count: count, late: late
        )
    }

    init(_ form: AlertPresentationForm) {
        self.form = form
    }

    public var app: String {
        get { self.form.app }
        set { self.form.app = newValue }
    }

    /// The request's id.
    public var id: String {
        get { self.form.id }
        set { self.form.id = newValue }
    }

    /// Its number in the app's delivered list.
    public var serial: Int {
        get { Int(self.form.serial) }
        set { self.form.serial = Int64(newValue) }
    }

    public var content: NotificationContent {
        get { self.form.content }
        set { self.form.content = newValue }
    }

    public var style: NotificationStyle {
        get { self.form.style }
        set { self.form.style = newValue }
    }

    /// The date of the (latest) fire it stands for.
    public var date: Date {
        get { Date(timeIntervalSince1970: self.form.date) }
        set { self.form.date = newValue.timeIntervalSince1970 }
    }

    /// How many fires it stands for (more than 1 for missed fires coalesced).
    public var count: Int {
        get { self.form.count }
        set { self.form.count = newValue }
    }

    /// Whether it is presented after its date was missed.
    public var late: Bool {
        get { self.form.late }
        set { self.form.late = newValue }
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

    /// The response as the app's `notification.didReceiveResponse` event carries it, which the daemon writes.
    var form: AlertResponseForm

    public init(id: String, action: Action, text: String? = nil, userInfoJSON: String = "{}") {
        self.form = AlertResponseForm(id: id, action: action.description, text: text, userInfo: userInfoJSON)
    }

    init(_ form: AlertResponseForm) {
        self.form = form
    }

    /// The request's id.
    public var id: String {
        get { self.form.id }
        set { self.form.id = newValue }
    }

    public var action: Action {
        get { Action(self.form.action) }
        set { self.form.action = newValue.description }
    }

    /// What the user typed, if anything.
    public var text: String? {
        get { self.form.text }
        set { self.form.text = newValue }
    }

    /// The content's `userInfoJSON`, handed back as it was scheduled.
    public var userInfoJSON: String {
        get { self.form.userInfo }
        set { self.form.userInfo = newValue }
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

extension NotificationRequest {
    /// `Request` as Schedule takes it.
    func wire() throws(CoalescedError) -> JSONValue {
        let userInfo: JSONValue
        do {
            userInfo = try JSONParser.parse(self.content.userInfo)
        } catch {
            throw .invalidPayload(kind: "userInfo", reason: "is not JSON: \(error)")
        }
        guard userInfo.objectValue != nil else {
            throw .invalidPayload(kind: "userInfo", reason: "userInfo is a JSON object, not \(self.content.userInfo)")
        }
        return self.form.wire(compact: true)
    }
}
