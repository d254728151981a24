import Varlink

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A run of a scheduled refresh: its id, and how long the app runs for it.
public struct BackgroundRefresh: Sendable, Hashable {
    public var id: String
    public var budget: Duration

    public init(id: String, budget: Duration) {
        self.id = id
        self.budget = budget
    }
}

/// An open background task: while the app holds one in the background it is not suspended, until its background
/// time runs out.
public struct BackgroundTask: Sendable, Hashable {
    /// The daemon's number for it.
    public var id: Int
    /// The name it was begun with (for the journal).
    public var name: String
    /// Background time left when it began; `nil` when the daemon gives background tasks no budget
    /// (`BackgroundTaskBudgetSec=infinity`, `coalesced --no-deadlines`).
    public var remaining: Duration?

    public init(id: Int, name: String, remaining: Duration?) {
        self.id = id
        self.name = name
        self.remaining = remaining
    }
}

/// An event posted to the app: one kind and what its posts add up to (one post, while the app runs code; all
/// the posts of the kind since it was suspended, folded by the kind's policy, when it wakes).
public struct Event: Sendable, Hashable {
    /// Its number in the app's stream: always increasing; an event not acknowledged comes again with a new one.
    public var sequence: Int
    /// The posted kind, such as `mail.received`.
    public var kind: String
    /// What the posts add up to, as JSON text (an object); `nil` for a kind whose policy is `count` and for a
    /// queue's overflow marker. ``decode(_:)`` reads it into a `Decodable` type.
    public var payloadJSON: String?
    /// How many posts this event stands for.
    public var count: Int
    /// When the first and the last of them were posted, in seconds since the Unix epoch.
    public var firstPosted: Double
    public var lastPosted: Double
    /// For a queue's overflow marker: how many of the oldest posts were dropped.
    public var dropped: Int?

    public init(
        sequence: Int,
        kind: String,
        payloadJSON: String?,
        count: Int = 1,
        firstPosted: Double = 0,
        lastPosted: Double = 0,
        dropped: Int? = nil
    ) {
        self.sequence = sequence
        self.kind = kind
        self.payloadJSON = payloadJSON
        self.count = count
        self.firstPosted = firstPosted
        self.lastPosted = lastPosted
        self.dropped = dropped
    }

    /// The payload read into `type` with a `JSONDecoder`: `try event.decode(Mail.self)`.
    /// - Throws: ``CoalescedError/invalidPayload(kind:reason:)`` when the event has no payload or it does not
    ///   decode, saying why.
    public func decode<Payload: Decodable>(_ type: Payload.Type = Payload.self) throws(CoalescedError) -> Payload {
        guard let text = self.payloadJSON else {
            throw .invalidPayload(kind: self.kind, reason: "the event has no payload (count \(self.count))")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw .invalidPayload(kind: self.kind, reason: "does not decode as \(Payload.self): \(error)")
        }
    }
}

/// One thing the daemon tells the app on its stream: a lifecycle callback or an event. ``CoalescedApp/events``
/// delivers them in the order the daemon sent them.
public enum Delivery: Sendable, Hashable {
    /// The app is being launched: sent just before didFinishLaunching, with the same options.
    case willFinishLaunching(LaunchOptions)
    /// The app was launched. Until it is acknowledged the launch's deadline runs.
    case didFinishLaunching(LaunchOptions)
    case didBecomeActive
    case willResignActive
    /// The app went to the background; once this is acknowledged and no background task is open it is
    /// suspended. Begin a background task before the loop body ends to keep running code.
    case didEnterBackground
    case willEnterForeground
    /// The app is being terminated: the sequence ends after it, and the process should exit. It is not
    /// acknowledged, so that the process ends on its own instead of by SIGTERM.
    case willTerminate
    /// A background task's time is nearly up: end it.
    case backgroundTaskWillExpire(BackgroundTask)
    /// The time a wake into the background gave the app (a post of a kind declared `wakes: background` woke it)
    /// is nearly up: finish with what it was sent, which acknowledging ends the wake; it is suspended when the time
    /// is up whatever it is doing.
    case backgroundTimeWillExpire
    case didReceiveMemoryWarning
    case significantTimeChange
    case protectedDataWillBecomeUnavailable
    case protectedDataDidBecomeAvailable
    /// One of the app's scheduled refreshes came due (the event `lifecycle.backgroundRefresh`): do its work within
    /// its budget, then say how it went (``CoalescedApp/refreshDone(_:success:)``).
    case backgroundRefresh(BackgroundRefresh)
    /// A URL was opened with the app (the event `lifecycle.openURL`): at once while it runs code, after its
    /// launch's or wake's callbacks otherwise.
    case openURL(OpenedURL)
    /// An event posted to the app.
    case event(Event)
    /// One of the app's notifications fired while it is active (the event `notification.willPresent`); otherwise
    /// the desktop presents it. Show it in the app as it sees fit; it is in the delivered list either way.
    case willPresent(NotificationPresentation)
    /// The user answered one of the app's notifications (the event `notification.didReceiveResponse`): at once
    /// while the app runs code, when it wakes otherwise; an app not running is launched for it.
    case didReceiveResponse(NotificationResponse)
    /// A window of the app appeared: a new scene (`scene.willConnect`), with what the app saved for it.
    case sceneWillConnect(Scene, SceneConnectionOptions)
    /// The scene's window is coming on screen.
    case sceneWillEnterForeground(Scene)
    /// The scene's window has the focus.
    case sceneDidBecomeActive(Scene)
    /// The scene's window is losing the focus, or the screen is locked.
    case sceneWillResignActive(Scene)
    /// The scene's window went off screen (minimized, another workspace).
    case sceneDidEnterBackground(Scene)
    /// The scene's window closed.
    case sceneDidDisconnect(Scene)
}

/// Encodes a payload into the JSON object a post carries.
func payloadObject(_ payload: some Encodable, kind: String) throws(CoalescedError) -> JSONObject {
    let data: Data
    do {
        data = try JSONEncoder().encode(payload)
    } catch {
        throw .invalidPayload(kind: kind, reason: "does not encode: \(error)")
    }
    let value: JSONValue
    do {
        value = try JSONParser.parse(Array(data))
    } catch {
        throw .invalidPayload(kind: kind, reason: "does not encode to JSON: \(error)")
    }
    guard let object = value.objectValue else {
        throw .invalidPayload(kind: kind, reason: "a payload is a JSON object; \(type(of: payload)) encodes to \(value.jsonText)")
    }
    return object
}
