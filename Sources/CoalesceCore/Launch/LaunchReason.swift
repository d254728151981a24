/// Why an app is launched: what its launch options say with willFinishLaunching and didFinishLaunching (UIKit's
/// launch options keys).
public enum LaunchReason: Sendable, Hashable {
    /// A person opened it: its process started on its own and attached, or an operator's Launch.
    case user
    /// A post of a kind that launches it: one mapped to a background mode, or declared `wakes: background`.
    case event(kind: String)
    /// Its user answered one of its notifications (`action` is the button, or default, snooze).
    case notification(id: String, action: String)
    /// A URL was opened with it (App.Open).
    case url(OpenedURL)
    /// Its scheduled background refresh of this id came due (ScheduleRefresh).
    case refresh(id: String)

    /// The word launch options carry for it.
    public var word: String {
        switch self {
        case .user: "user"
        case .event: "event"
        case .notification: "notification"
        case .url: "url"
        case .refresh: "refresh"
        }
    }
}

/// A URL opened with an app: the URL, who opened it, and the type it was opened as (for a document).
public struct OpenedURL: Sendable, Hashable {
    public var url: String
    /// The uid of the peer that called Open.
    public var opener: UInt32
    /// The MIME type the opener named, if any.
    public var type: String?

    public init(url: String, opener: UInt32, type: String? = nil) {
        self.url = url
        self.opener = opener
        self.type = type
    }
}

/// How much of its saved state an app launched should bring back, as GTK's and the session-management portal's
/// restore reasons say it: decided from how its last process ended.
public enum LaunchRestoration: String, Sendable, Hashable, CaseIterable {
    /// Nothing to restore: the app kept no state (or never ran).
    case pristine
    /// An ordinary launch: its last process was ended on request (Terminate), or ended before this run of the daemon
    /// began. Restore as little as is reasonable.
    case launch
    /// Its last process ended on its own, or was killed for not answering a callback in time: it crashed. Restore
    /// what was saved, with care.
    case recover
    /// The system ended its last process for its own reasons (a purge, exits-on-suspend, its background time): bring
    /// back as much as was saved, as iOS's state restoration does.
    case restore

    /// - Parameters:
    ///   - end: why its last process ended (the reason it became not running); `nil` when this run of the daemon has
    ///     not seen it run.
    ///   - hasSavedState: whether it saved state (App.SaveState) that this launch hands back.
    public static func after(_ end: TransitionReason?, hasSavedState: Bool) -> LaunchRestoration {
        guard hasSavedState else { return .pristine }
        switch end {
        case .processExited?, .launchNotAcknowledged?, .backgroundNotAcknowledged?, .notReattached?: return .recover
        case .purge?, .exitsOnSuspend?, .backgroundTasksExpired?: return .restore
        default: return .launch
        }
    }
}

/// Launches that ended before the app finished launching, in a row (crash-loop protection). Past the limit the daemon
/// no longer launches the app by itself (for an event, a notification's answer, a URL) until an operator launches
/// it: systemd's start limit, for apps.
public struct FailedLaunches: Sendable, Hashable {
    /// How many launches in a row ended before the app acknowledged didFinishLaunching.
    public private(set) var inARow = 0

    public init(inARow: Int = 0) {
        self.inARow = inARow
    }

    /// A launch ended early: its process died before acknowledging didFinishLaunching, was killed for not doing so in
    /// time, or never attached. Returns true when this failure reaches `limit` (told once, as it is reached).
    public mutating func failed(limit: Int?) -> Bool {
        self.inARow += 1
        return limit == self.inARow
    }

    /// The app acknowledged didFinishLaunching, or an operator launched it: it starts afresh.
    public mutating func cleared() {
        self.inARow = 0
    }

    /// Whether launches the daemon makes by itself are held back.
    public func holdsLaunches(limit: Int?) -> Bool {
        guard let limit else { return false }
        return self.inARow >= limit
    }
}
