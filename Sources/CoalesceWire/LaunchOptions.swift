public import CoalesceCore
public import Varlink

/// What willFinishLaunching and didFinishLaunching hand the app (the App interface's LaunchOptions): the daemon
/// writes them, the client library reads them.
public struct LaunchOptions: Sendable, Hashable {
    /// Where the launch put the app.
    public var destination: LaunchDestination
    /// Why it was launched.
    public var reason: LaunchReason
    /// How much of ``restoredState`` to bring back.
    public var restoration: LaunchRestoration
    /// What the app last kept with SaveState, if anything.
    public var restoredState: String?

    public init(
        destination: LaunchDestination,
        reason: LaunchReason = .user,
        restoration: LaunchRestoration = .pristine,
        restoredState: String? = nil
    ) {
        self.destination = destination
        self.reason = reason
        self.restoration = restoration
        self.restoredState = restoredState
    }

    /// Reads what a daemon sent; what it leaves out, or a word this version does not know, reads as a launch by the
    /// user to the foreground with nothing to restore.
    public init(wire: JSONValue?) {
        self.destination = wire?["destination"]?.stringValue.flatMap(LaunchDestination.init(rawValue:)) ?? .foreground
        self.restoredState = wire?["restoredState"]?.stringValue
        self.restoration = wire?["restoration"]?.stringValue.flatMap(LaunchRestoration.init(rawValue:))
            ?? (self.restoredState == nil ? .pristine : .launch)
        switch wire?["reason"]?.stringValue {
        case "event":
            self.reason = wire?["event"]?.stringValue.map { .event(kind: $0) } ?? .user
        case "notification":
            if let id = wire?["notification"]?["id"]?.stringValue, let action = wire?["notification"]?["action"]?.stringValue {
                self.reason = .notification(id: id, action: action)
            } else {
                self.reason = .user
            }
        case "url":
            self.reason = OpenedURLForm.read(wire?["url"]).map { .url($0) } ?? .user
        case "refresh":
            self.reason = wire?["refresh"]?.stringValue.map { .refresh(id: $0) } ?? .user
        default:
            self.reason = .user
        }
    }

    public var wire: JSONObject {
        var options: JSONObject = [
            "destination": .string(self.destination.rawValue), "reason": .string(self.reason.word),
            "restoration": .string(self.restoration.rawValue),
        ]
        if let restored = self.restoredState { options["restoredState"] = .string(restored) }
        switch self.reason {
        case .user: break
        case .event(let kind): options["event"] = .string(kind)
        case .notification(let id, let action): options["notification"] = ["id": .string(id), "action": .string(action)]
        case .url(let opened): options["url"] = .object(OpenedURLForm.wire(opened))
        case .refresh(let id): options["refresh"] = .string(id)
        }
        return options
    }
}

/// A URL opened with an app as its `lifecycle.openURL` event and its launch options carry it (the App interface's
/// OpenedURL).
public enum OpenedURLForm {
    public static func wire(_ opened: OpenedURL) -> JSONObject {
        var object: JSONObject = ["url": .string(opened.url), "opener": .int(Int64(opened.opener))]
        if let type = opened.type { object["type"] = .string(type) }
        return object
    }

    /// `nil` when it is not one (no url, or no opener that is a uid).
    public static func read(_ value: JSONValue?) -> OpenedURL? {
        guard let url = value?["url"]?.stringValue, let opener = value?["opener"]?.intValue, let uid = UInt32(exactly: opener)
        else { return nil }
        return OpenedURL(url: url, opener: uid, type: value?["type"]?.stringValue)
    }
}
