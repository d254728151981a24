import CoalesceCore
import Varlink

// The manager's state besides its registry of apps: each part a value that owns its fields, under the manager's one
// lock. One lock over them all keeps a post at one acquisition and needs no order among them.

/// Who watches what happens to apps (``AppManager/monitor(_:responder:)``), and what they are told of the posts taken
/// while one watches traffic.
struct MonitorBoard {
    private(set) var monitors: [Int: AppManager.Monitor] = [:]
    /// Monitors watching posts, deliveries, acknowledgements or attachments: where none does, a post's one check.
    private(set) var trafficMonitors = 0
    /// What monitors are told of each post taken while a monitor watches traffic, by the number its ticket carries
    /// (``AppManager/PostTicket/seen``), until its answer is counted; emptied when the last monitor watching traffic
    /// goes.
    private var postsSeen: [Int: PostSeen] = [:]
    private var lastPostSeen = 0

    var isEmpty: Bool { self.monitors.isEmpty }
    var watchesTraffic: Bool { self.trafficMonitors > 0 }
    /// The number the next post seen is kept under.
    var nextPostSeen: Int { self.lastPostSeen + 1 }

    mutating func add(_ id: Int, _ monitor: AppManager.Monitor) {
        self.monitors[id] = monitor
        if monitor.filter.watchesTraffic { self.trafficMonitors += 1 }
    }

    mutating func remove(_ id: Int) {
        guard let monitor = self.monitors.removeValue(forKey: id), monitor.filter.watchesTraffic else { return }
        self.trafficMonitors -= 1
        if self.trafficMonitors == 0 { self.postsSeen.removeAll() }
    }

    /// Queues one record for each monitor whose filter shows it, its reply made once. Returns the monitors whose
    /// unread replies passed `bound`: removed instead, for the caller to end.
    mutating func tell(
        _ record: MonitorFilter.Records,
        app: AppName,
        kind: EventKind?,
        bound: Int,
        into outbox: inout Outbox<AppAction>,
        _ reply: () -> JSONObject
    ) -> [Int] {
        var made: JSONObject?
        var overrun: [Int] = []
        for (id, monitor) in self.monitors where monitor.filter.shows(record, app: app, kind: kind) {
            if monitor.responder.backlog > bound {
                overrun.append(id)
            } else {
                if made == nil { made = reply() }
                outbox.add(.send(monitor.responder, [made!]))
            }
        }
        for id in overrun { self.remove(id) }
        return overrun
    }

    /// Keeps what monitors are told of a post, under the number its ticket carries.
    mutating func saw(_ post: PostSeen, as number: Int) {
        self.lastPostSeen = number
        self.postsSeen[number] = post
    }

    /// What monitors are told of the post kept under `number`, now that its answer is counted.
    mutating func takePost(_ number: Int) -> PostSeen? {
        self.postsSeen.removeValue(forKey: number)
    }
}

/// Streaming calls (an Attach, a Monitor) parked until their end, and how each ended.
struct Parks {
    private var parks: [Int: AppManager.Park] = [:]

    mutating func open(_ id: Int) {
        self.parks[id] = AppManager.Park()
    }

    /// The park's task waits: `nil`, or how the stream already ended (the park is closed then).
    mutating func wait(_ id: Int, _ continuation: CheckedContinuation<AppManager.StreamEnd, Never>) -> AppManager.StreamEnd? {
        guard let end = self.parks[id]?.end else {
            self.parks[id]?.continuation = continuation
            return nil
        }
        self.parks[id] = nil
        return end
    }

    /// The stream ended: its task hears so now if it waits (queued), or when it comes to wait. The first end counts.
    mutating func end(_ id: Int, _ end: AppManager.StreamEnd, into outbox: inout Outbox<AppAction>) {
        guard var park = self.parks[id] else { return }
        if let continuation = park.continuation {
            self.parks[id] = nil
            outbox.add(.endPark(continuation, end))
        } else if park.end == nil {
            park.end = end
            self.parks[id] = park
        }
    }
}

/// The screen lock as the seat's session last said, and the apps that woke not knowing it (told once the lock is let
/// go, ``AppManager/decide(_:)``). What each app was last told is its own (`Record.toldProtectedDataAvailable`).
struct ScreenLockBook {
    /// Whether the screen is unlocked (protected data available).
    var available = true
    var news: [(AppName, Bool)] = []
}

/// Who waits for an app to acknowledge a callback (``AppManager/waitForAcknowledgement(of:sequence:within:)``), by
/// app: the number and the waiter.
struct AcknowledgementWaiters {
    private var waiting: [AppName: [(sequence: UInt64, waiter: CheckedContinuation<Bool, Never>)]] = [:]

    var isEmpty: Bool { self.waiting.isEmpty }

    mutating func add(_ app: AppName, _ sequence: UInt64, _ waiter: CheckedContinuation<Bool, Never>) {
        self.waiting[app, default: []].append((sequence, waiter))
    }

    /// Removes and returns the waiters of `app` for numbers up to `sequence` (or, `expiring`, those waiting for
    /// exactly `sequence`, whose time ran out).
    mutating func take(of app: AppName, upTo sequence: UInt64, expiring: Bool = false) -> [CheckedContinuation<Bool, Never>] {
        guard let waiting = self.waiting[app] else { return [] }
        let done = waiting.filter { expiring ? $0.sequence == sequence : $0.sequence <= sequence }
        guard !done.isEmpty else { return [] }
        let left = waiting.filter { expiring ? $0.sequence != sequence : $0.sequence > sequence }
        self.waiting[app] = left.isEmpty ? nil : left
        return done.map(\.waiter)
    }
}

/// What each session last reported of its windows (``AppManager/reportWindows(_:source:uid:)``): each window by its
/// id, with the app it is a scene of, so that a window a report no longer has closes its scene.
struct WindowBook {
    /// Who reports: a user's session, through one source.
    struct Reporter: Hashable {
        var uid: UInt32
        var source: SceneSource
    }

    struct Shown: Equatable {
        var app: AppName
        var window: ReportedWindow
    }

    /// Each reporter's windows that are scenes, by window id.
    var scenes: [Reporter: [String: Shown]] = [:]
    /// Each reporter's last report, whole: its windows of apps not running become their scenes once they attach.
    var reports: [Reporter: [ReportedWindow]] = [:]
    /// The streams each reporter's agent takes focus requests on (`io.coalesced.Screen.FocusRequests`), by park id.
    private(set) var focusStreams: [Reporter: [Int: VarlinkResponder]] = [:]

    mutating func addFocusStream(_ id: Int, _ responder: VarlinkResponder, of reporter: Reporter) {
        self.focusStreams[reporter, default: [:]][id] = responder
    }

    mutating func removeFocusStream(_ id: Int) {
        for (reporter, streams) in self.focusStreams where streams[id] != nil {
            self.focusStreams[reporter]![id] = nil
            if self.focusStreams[reporter]!.isEmpty { self.focusStreams[reporter] = nil }
        }
    }

    /// The reporter whose session shows `scene` as a window of `app`: the app's owner's own session first (root's
    /// agent may report anyone's windows), then by uid, so that the choice does not depend on a dictionary's order.
    func reporter(showing scene: SceneID, of app: AppName, owner: UInt32) -> Reporter? {
        self.scenes.filter { $0.value[scene.value]?.app == app }.keys
            .min { ($0.uid == owner ? 0 : 1, $0.uid, $0.source.rawValue) < ($1.uid == owner ? 0 : 1, $1.uid, $1.source.rawValue) }
    }
}
