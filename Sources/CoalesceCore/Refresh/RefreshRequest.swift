/// A condition a background refresh may require (`ScheduleRefresh`'s `requires`), as BGProcessingTask's and
/// WorkManager's constraints: each read from the system's bus.
public enum RefreshCondition: String, Sendable, Hashable, CaseIterable, Comparable {
    /// The machine runs on external power (logind's `OnExternalPower`).
    case acPower
    /// The machine does not run on its battery (UPower's `OnBattery` false).
    case notOnBattery
    /// The network reaches the internet (NetworkManager's `Connectivity` full, or systemd-networkd's
    /// `OperationalState` routable).
    case network
    /// Nobody uses the machine (logind's `IdleHint`).
    case idle

    public static func < (lhs: Self, rhs: Self) -> Bool {
        Self.allCases.firstIndex(of: lhs)! < Self.allCases.firstIndex(of: rhs)!
    }
}

/// What the system says of each condition now: `nil` where it cannot be known (no service on the bus that tells),
/// which counts as holding: a machine with no power service runs on mains, one with no network manager has its
/// network configured by hand.
public struct SystemConditions: Sendable, Hashable {
    public var known: [RefreshCondition: Bool]

    public init(_ known: [RefreshCondition: Bool] = [:]) {
        self.known = known
    }

    public func holds(_ condition: RefreshCondition) -> Bool { self.known[condition] ?? true }

    /// The conditions of `required` that do not hold, in order.
    public func unmet(_ required: Set<RefreshCondition>) -> [RefreshCondition] {
        required.sorted().filter { !self.holds($0) }
    }
}

/// What becomes of runs missed while the daemon was not running or the machine slept.
public enum RefreshLatePolicy: String, Sendable, Hashable, CaseIterable {
    /// Every missed run of it comes to one run, as soon as it can (the default).
    case runOnce
    /// A run whose window has passed is skipped: a periodic refresh waits for its next period, a one-time one is
    /// dropped.
    case skip
}

/// A background refresh an app asks for (BGAppRefreshTaskRequest, WorkManager's work request): run no earlier than
/// `earliest`, at a time within `flex` after it that suits several apps at once, when its conditions hold; again
/// every `interval` if it repeats.
public struct RefreshRequest: Sendable, Hashable {
    public var id: String
    /// Seconds since the Unix epoch.
    public var earliest: Double
    public var interval: Duration?
    /// How long after `earliest` it may wait for a slot it shares with other apps' refreshes.
    public var flex: Duration
    public var requires: Set<RefreshCondition>
    /// How long the app runs in the background for it.
    public var budget: Duration
    public var late: RefreshLatePolicy

    public init(
        id: String,
        earliest: Double,
        interval: Duration? = nil,
        flex: Duration = .seconds(60),
        requires: Set<RefreshCondition> = [],
        budget: Duration = .seconds(30),
        late: RefreshLatePolicy = .runOnce
    ) {
        self.id = id
        self.earliest = earliest
        self.interval = interval
        self.flex = flex
        self.requires = requires
        self.budget = budget
        self.late = late
    }
}

/// How a run ended.
public enum RefreshOutcome: String, Sendable, Hashable {
    /// The app said it finished (RefreshDone with success).
    case done
    /// The app said it failed: it is tried again after a backoff.
    case failed
    /// Its budget ran out before the app said anything: a failure.
    case expired
}

/// One scheduled refresh of one app, as it stands: its request, when its window next opens, and how its last runs
/// went.
public struct RefreshTask: Sendable, Hashable {
    public var request: RefreshRequest
    /// When its current window opens (seconds since the epoch): `earliest`, then each period, or a backoff.
    public var due: Double
    /// Failed or expired runs in a row.
    public var failures: Int
    public var lastRun: Double?
    public var lastOutcome: RefreshOutcome?

    public init(request: RefreshRequest, due: Double? = nil, failures: Int = 0, lastRun: Double? = nil, lastOutcome: RefreshOutcome? = nil) {
        self.request = request
        self.due = due ?? request.earliest
        self.failures = failures
        self.lastRun = lastRun
        self.lastOutcome = lastOutcome
    }

    /// When its window closes: the latest it waits for a shared slot.
    public var deadline: Double { self.due + RefreshTask.seconds(self.request.flex) }

    /// The wait before a run after `failures` failures in a row: 30 s, doubling, at most an hour (WorkManager's
    /// exponential backoff).
    public static func backoff(after failures: Int) -> Duration {
        let seconds = min(30.0 * Double(1 << min(max(failures, 1) - 1, 16)), 3600)
        return .milliseconds(Int64(seconds * 1000))
    }

    /// A duration in seconds, as the store and the interface give them.
    public static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Seconds as a duration, to the millisecond; what is not a number reads as zero, and the span is bounded (a row
    /// of a damaged store never traps).
    public static func duration(seconds: Double) -> Duration {
        guard seconds.isFinite else { return .zero }
        return .milliseconds(Int64((min(max(seconds, -1e12), 1e12) * 1000).rounded()))
    }
}
