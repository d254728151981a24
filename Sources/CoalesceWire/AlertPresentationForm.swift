public import CoalesceCore
public import Varlink

/// One presentation as io.coalesced.Notifications' `Presentation` writes it: in the delivered list, on the agents'
/// `Presentations` stream and in an app's `notification.willPresent` event. The daemon writes it, and the client
/// library and the desktop agent read it, here.
public struct AlertPresentationForm: Sendable, Hashable {
    public var app: String
    /// The request's id.
    public var id: String
    /// Its number in the app's delivered list.
    public var serial: Int64
    public var content: AlertContent
    public var style: AlertStyle
    /// The date of the (latest) fire it stands for, in seconds since the Unix epoch.
    public var date: Double
    /// How many fires it stands for.
    public var count: Int
    /// Whether it is presented after its date was missed.
    public var late: Bool

    public init(
        app: String, id: String, serial: Int64, content: AlertContent, style: AlertStyle, date: Double, count: Int, late: Bool
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

    /// Every member, the content's too.
    public var wire: JSONObject {
        [
            "app": .string(self.app), "id": .string(self.id), "serial": .int(self.serial),
            "content": self.content.wire(), "style": .string(self.style.rawValue), "date": .double(self.date),
            "count": .int(Int64(self.count)), "late": .bool(self.late),
        ]
    }

    /// Reads the wire form (``wire``); a style the reader does not know is a banner, a count left out 1.
    /// - Throws: when `app`, `id`, `serial`, `content` or `date` is missing, or the content is not one.
    public init(wire value: JSONValue) throws(WireFormError) {
        guard let app = value["app"]?.stringValue, let id = value["id"]?.stringValue,
            let serial = value["serial"]?.intValue, let content = value["content"], let date = value["date"]?.doubleValue
        else { throw WireFormError("a presentation without app, id, serial, content or date") }
        self.init(
            app: app,
            id: id,
            serial: serial,
            content: try AlertContent.reading(wire: content),
            style: value["style"]?.stringValue.flatMap(AlertStyle.init(rawValue:)) ?? .banner,
            date: date,
            count: value["count"]?.intValue.map { Int(clamping: $0) } ?? 1,
            late: value["late"]?.boolValue ?? false
        )
    }
}
