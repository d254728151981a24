/// A request's name: the app and its id within the app.
public struct AlertKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var app: AppName
    public var id: String

    public init(app: AppName, id: String) {
        self.app = app
        self.id = id
    }

    public static func < (lhs: AlertKey, rhs: AlertKey) -> Bool { (lhs.app, lhs.id) < (rhs.app, rhs.id) }
    public var description: String { "\(self.app)/\(self.id)" }
}

/// What the store keeps of one pending request: with these the scheduler starts again after a restart
/// (``AlertScheduler/started(restoring:now:)``) and loses no fire and repeats none.
public struct AlertRecord: Sendable, Hashable {
    public var key: AlertKey
    public var request: AlertRequest
    /// The instant its dates count from, on the wall clock: when it was scheduled, or the time the clock was set
    /// back to, if it was set back before that while the request had not fired (nothing fired, so nothing fires
    /// twice).
    public var since: WallTime
    /// The date of its last fire (presented, coalesced or dropped), or the instant up to which missed fires were
    /// skipped (``AlertDropReason/tooManyMissed(limit:through:)``); `nil` before the first. A repeating calendar
    /// rule's next date is the first after it, so a clock set back never fires a date again.
    public var lastFire: WallTime?
    /// How many of its fires were handled: the next is fire `fires + 1`.
    public var fires: Int
    /// An `after` trigger's next date on the wall clock. The boot-time clock starts again at each boot, so across a
    /// restart of the daemon the interval runs on the wall clock: the next date is kept as a wall instant, and
    /// turned back into a boot-time instant at start-up.
    public var intervalDue: WallTime?

    public init(key: AlertKey, request: AlertRequest, since: WallTime, lastFire: WallTime? = nil, fires: Int = 0, intervalDue: WallTime? = nil) {
        self.key = key
        self.request = request
        self.since = since
        self.lastFire = lastFire
        self.fires = fires
        self.intervalDue = intervalDue
    }
}

/// One fire of a request: its number (1 for the first) and its date on the wall clock (for an `after` trigger,
/// the wall instant the boot-time date stood for when it was handled).
public struct AlertFire: Sendable, Hashable {
    public var id: String
    public var number: Int
    public var date: WallTime

    public init(id: String, number: Int, date: WallTime) {
        self.id = id
        self.number = number
        self.date = date
    }
}

/// A notification to present.
public struct AlertPresentation: Sendable, Hashable {
    public var app: AppName
    /// The request whose content is shown: the one of the latest fire it stands for.
    public var id: String
    public var content: AlertContent
    public var style: AlertStyle
    /// The fires it stands for, in date order: one, or more for missed fires coalesced.
    public var fires: [AlertFire]
    /// Whether its fires were missed (handled more than ``AlertConfiguration/lateAfter`` after their dates).
    public var late: Bool
    /// The fires of earlier presentations folded into this one by the presentation rate (``PresentationRate``),
    /// besides those listed in ``fires``; 0 for one the scheduler made.
    public var folded = 0

    /// - Parameter fires: at least one.
    public init(app: AppName, id: String, content: AlertContent, style: AlertStyle, fires: [AlertFire], late: Bool, folded: Int = 0) {
        precondition(!fires.isEmpty, "a presentation stands for at least one fire")
        self.app = app
        self.id = id
        self.content = content
        self.style = style
        self.fires = fires
        self.late = late
        self.folded = folded
    }

    /// The date of its latest fire.
    public var date: WallTime { self.fires[self.fires.count - 1].date }
    /// How many fires it stands for.
    public var count: Int { self.fires.count + self.folded }
}

/// Why missed fires were not presented.
public enum AlertDropReason: Sendable, Hashable {
    /// They were later than the request's grace period (``LatePolicy/dropAfter(_:)``).
    case pastGrace(Duration)
    /// The request missed more than ``AlertConfiguration/maximumFiresHandled`` fires at once; those past the limit,
    /// up to `through`, were skipped without being counted.
    case tooManyMissed(limit: Int, through: WallTime)
}

/// Missed fires of one request not presented, so that the shell can log them.
public struct AlertDrop: Sendable, Hashable {
    public var key: AlertKey
    /// The fires dropped, counted (none for ``AlertDropReason/tooManyMissed(limit:through:)``).
    public var fires: [AlertFire]
    public var reason: AlertDropReason
}

/// What the shell does after an input to the scheduler, in the order given.
public enum AlertAction: Sendable, Hashable {
    /// Store the request as given (replacing what the store has under its key). The shell writes the records and
    /// forgets of one input together, before it presents: a crash then loses no fire and repeats none.
    case keep(AlertRecord)
    /// Remove the request from the store: it fired for the last time, or was cancelled or replaced by a key no
    /// longer pending.
    case forget(AlertKey)
    /// Present the notification (through the app's stream or the sinks).
    case present(AlertPresentation)
    /// Log the fires dropped, with the reason.
    case dropped(AlertDrop)
    /// Arm the timers, replacing what they were: a wall-clock timer at `wall` and a boot-time timer at `boot`
    /// (`nil`: disarmed). When either expires the shell calls ``AlertScheduler/fired(now:)``. Always the last action.
    case arm(wall: WallTime?, boot: BootTime?)
}

/// The scheduler's settings.
public struct AlertConfiguration: Sendable, Hashable {
    /// How many requests an app may have pending; one more is refused with ``AlertError/pendingLimit(limit:pending:)``.
    public var pendingLimit: Int
    /// A fire handled later than this after its date was missed, and its request's ``LatePolicy`` applies.
    public var lateAfter: Duration
    /// How many fires of one request are handled in one input; past that, the rest up to now are skipped
    /// (``AlertDropReason/tooManyMissed(limit:through:)``): a rule of every minute after a year asleep costs no
    /// more than this.
    public var maximumFiresHandled: Int

    public init(pendingLimit: Int = 64, lateAfter: Duration = .seconds(60), maximumFiresHandled: Int = 1000) {
        self.pendingLimit = pendingLimit
        self.lateAfter = lateAfter
        self.maximumFiresHandled = maximumFiresHandled
    }
}

/// One pending request, as ``AlertScheduler/pending(of:now:)`` lists it.
public struct PendingAlert: Sendable, Hashable {
    public var request: AlertRequest
    /// Its next date on the wall clock (for an `after` trigger, what its boot-time date stands for now).
    public var next: WallTime
    public var lastFire: WallTime?
}
