public import Varlink

/// The user's answer to a presentation, in the two places io.coalesced.Notifications carries it: Respond's
/// parameters, which the desktop agent and coalescectl send for the user (``respond(app:)``), and the app's
/// `notification.didReceiveResponse` event, which the daemon writes with the request's user info and the client
/// library reads (``wire``).
public struct AlertResponseForm: Sendable, Hashable {
    /// The request's id.
    public var id: String
    /// `default` (the notification was opened), `dismiss`, or the id of the action chosen.
    public var action: String
    /// What the user typed, if anything.
    public var text: String?
    /// The request's user info, handed back as it was scheduled: the text of a JSON object. The event carries it;
    /// Respond does not, since the daemon adds it.
    public var userInfo: String

    public init(id: String, action: String, text: String? = nil, userInfo: String = "{}") {
        self.id = id
        self.action = action
        self.text = text
        self.userInfo = userInfo
    }

    /// The event's payload: `id`, `action`, `userInfo` (`{}` when ``userInfo`` is not the text of an object), and
    /// `text` when the user typed one.
    public var wire: JSONObject {
        var object: JSONObject = ["id": .string(self.id), "action": .string(self.action), "userInfo": self.userInfoValue]
        if let text = self.text { object["text"] = .string(text) }
        return object
    }

    /// Respond's parameters for the app's user: `app`, `id`, `action`, and `text` when the user typed one.
    public func respond(app: String) -> JSONObject {
        var object: JSONObject = ["app": .string(app), "id": .string(self.id), "action": .string(self.action)]
        if let text = self.text { object["text"] = .string(text) }
        return object
    }

    /// Reads the event's payload (``wire``); `text` and `userInfo` may be left out or null (no user info is `{}`).
    /// - Throws: when it is not an object, `id` or `action` is missing, `text` is not a string or `userInfo` not
    ///   an object.
    public init(wire value: JSONValue) throws(WireFormError) {
        guard let object = value.objectValue else { throw WireFormError("a response is an object") }
        guard let id = object["id"]?.stringValue, let action = object["action"]?.stringValue else {
            throw WireFormError("a response without id or action")
        }
        var text: String?
        if let member = object["text"], member != .null {
            guard let typed = member.stringValue else { throw WireFormError("a response's text \(member.jsonText) is not a string") }
            text = typed
        }
        var userInfo = "{}"
        if let member = object["userInfo"], member != .null {
            guard member.isObject else { throw WireFormError("a response's userInfo is a JSON object") }
            userInfo = member.jsonText
        }
        self.init(id: id, action: action, text: text, userInfo: userInfo)
    }

    private var userInfoValue: JSONValue {
        // The daemon takes the user info from the request it checked, and an app's own value went through this
        // reader; text that is not an object is nobody's to hand back.
        guard let value = try? JSONParser.parse(self.userInfo), value.isObject else { return .object([:]) }
        return value
    }
}
