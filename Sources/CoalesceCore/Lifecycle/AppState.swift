/// Where an app is in its lifecycle (DESIGN.md §1). The raw value is the wire name.
public enum AppState: String, Sendable, Hashable, CaseIterable {
    /// Never launched, terminated, or purged by the system: no process.
    case notRunning
    /// In the foreground but receiving no user events: during transitions, or while an interruption lasts.
    case inactive
    /// In the foreground, receiving events.
    case active
    /// Running code off-screen: briefly on the way to suspended, or while it holds background tasks or a mode.
    case background
    /// In memory, running no code; events for it are queued; it may be purged without notice.
    case suspended

    /// Whether the app's process exists.
    public var isRunning: Bool { self != .notRunning }

    /// Whether the app is on screen.
    public var isForeground: Bool { self == .inactive || self == .active }
}

/// What an app is told, in the order it happens. The raw value is the callback's name; the event kind on the wire
/// is ``kind``.
public enum LifecycleCallback: String, Sendable, Hashable, CaseIterable {
    /// The launch has begun (UIKit's willFinishLaunchingWithOptions): sent just before didFinishLaunching, with the
    /// same launch options, so that the app can set itself up before it handles what it was launched for.
    case willFinishLaunching
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    case didReceiveMemoryWarning
    case significantTimeChange
    case backgroundTaskWillExpire
    case protectedDataWillBecomeUnavailable
    case protectedDataDidBecomeAvailable

    /// The event kind that carries this callback: `lifecycle.didFinishLaunching`.
    public var kind: String { "lifecycle." + self.rawValue }
}

/// Why a transition happened; the journal's COALESCED_REASON.
public enum TransitionReason: String, Sendable, Hashable {
    case launch
    case activate
    case deactivate
    case interruptionBegan
    case interruptionEnded
    /// The system went to sleep (logind's PrepareForSleep): an interruption of the active app.
    case sleep
    /// The system woke from sleep: the interruption sleep began is over.
    case wake
    /// The seat's screen was locked: an interruption of the active app.
    case lock
    /// The screen was unlocked: the interruption the lock began is over.
    case unlock
    case terminate
    case exitsOnSuspend
    case purge
    case processExited
    /// The app's process outlived a restart of the daemon, which took up its recorded state, but did not attach
    /// again in time, or another process attached for the app first.
    case notReattached
    case launchNotAcknowledged
    case backgroundNotAcknowledged
    case backgroundTasksExpired
    case backgroundWorkDone
    /// A post of a kind the app declared to wake it (`wakes: background`) woke it from suspension into the background.
    case eventWake
    /// A URL was opened with the app (Open): it was launched, brought forward or woken for it.
    case openURL
    /// Its user answered one of its notifications with an action that runs in the background: it was woken for it.
    case notificationAction
    /// One of its scheduled background refreshes came due: it was woken for it.
    case refresh
    /// The app's scenes moved it: one of its windows was focused, shown, hidden or closed (``AppScenes``).
    case scenes
}

/// Where a launch puts the app.
public enum LaunchDestination: String, Sendable, Hashable {
    /// On screen, active: the user opened it.
    case foreground
    /// Off screen: an event or a background mode woke it.
    case background
}

/// What an app declared about itself when it registered.
public struct AppTraits: Sendable, Hashable {
    /// Background modes (audio, voip, …): with any, the app is never suspended in the background.
    public var backgroundModes: Set<String>
    /// Instead of being suspended, the app is told willTerminate and terminated.
    public var exitsOnSuspend: Bool

    public init(backgroundModes: Set<String> = [], exitsOnSuspend: Bool = false) {
        self.backgroundModes = backgroundModes
        self.exitsOnSuspend = exitsOnSuspend
    }
}

/// Deadlines and budgets, configurable; the defaults are DESIGN.md's.
public struct LifecycleTimings: Sendable, Hashable {
    /// How long an app has to acknowledge didFinishLaunching; `nil`: as long as it takes (no deadline).
    public var launchAcknowledgement: Duration? = .seconds(5)
    /// How long an app has to acknowledge didEnterBackground; `nil`: as long as it takes (no deadline).
    public var backgroundAcknowledgement: Duration? = .seconds(5)
    /// How long background tasks may run once the app is in the background; `nil`: as long as they are open (no
    /// budget, and so no warning).
    public var backgroundTaskBudget: Duration? = .seconds(30)
    /// How long before the budget runs out backgroundTaskWillExpire is sent.
    public var expiryWarning: Duration = .seconds(5)
    /// Whether an app whose budget ran out is terminated rather than suspended.
    public var terminateWhenBudgetRunsOut = false
    /// How many launches in a row may end before the app finishes launching before the daemon stops launching it by
    /// itself (`[Apps] FailedLaunchLimit=`); `nil`: no limit.
    public var failedLaunchLimit: Int? = 3

    public init() {}
}
