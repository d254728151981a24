/// An app told willResignActive for the system's sleep.
public struct SleepInterruption: Sendable, Hashable {
    public var app: AppName
    /// The number of its willResignActive: it has acknowledged once it acknowledges up to this.
    public var sequence: UInt64
    /// Whether a process is attached to hear it (one taken up after a restart and not attached is not waited for).
    public var attached: Bool

    public init(app: AppName, sequence: UInt64, attached: Bool) {
        self.app = app
        self.sequence = sequence
        self.attached = attached
    }

    /// Who a sleep interrupts, of the apps on screen: the active ones, by name. An app inactive for another
    /// interruption (a call) is left as it is, and so stays inactive after the wake.
    public static func appsToInterrupt(_ onScreen: [AppName: AppState]) -> [AppName] {
        onScreen.compactMap { $0.value == .active ? $0.key : nil }.sorted()
    }
}

/// Preparing for the system's sleep under logind's delay inhibitor (DESIGN.md §5), as a pure state machine: when the
/// inhibitor is asked for, kept and let go, who is told of the sleep, whose acknowledgement is waited for and until
/// when, which apps were late, when the store is flushed, and whom the wake makes active again. Each input returns
/// what to do, as values; the shell carries them out in the order given and feeds back what came of them.
///
/// The rules, each decided here and nowhere else:
/// - The inhibitor is asked for while none is held and the system is awake: at start, on the wake, and when logind
///   or the bus comes back. One that arrives when another is held or a sleep began meanwhile is let go at once.
/// - A sleep announced interrupts the active apps (``SleepInterruption/appsToInterrupt(_:)``). The attached ones
///   among them are waited for, each up to the number it was told, for three quarters of logind's delay
///   (``budget(for:)``); the rest of the delay is the flush's and a margin. An app told but not attached (taken up
///   after a restart) is not waited for.
/// - An app whose wait ends without its acknowledgement (the shell ends each wait at the deadline) is
///   late; the sleep goes ahead without it. Once no app is waited for the store is flushed, and once it is on disk
///   the inhibitor held at the announcement is let go.
/// - The wake asks for the inhibitor again and makes active again the apps every sleep since the last wake
///   interrupted (the manager skips one something else took out of the foreground meanwhile). A wake announced
///   while a preparation runs comes after it.
/// - A second sleep announced without a wake between (its signal was lost) is prepared as the first, without an
///   inhibitor to let go, and its wake makes active the apps of both.
/// - When logind or the bus comes back while the system is taken to be asleep, logind is asked whether it is
///   preparing for sleep; if not, the wake's signal was lost and the wake is caught up with.
///
/// - `Instant`: the time the deadline and the preparation's length are measured in, passed in with each input.
/// - `Inhibitor`: the shell's handle of an inhibitor logind granted (its file descriptor).
public struct SleepPreparation<Instant: InstantProtocol, Inhibitor> where Instant.Duration == Duration {
    /// What a preparation came to, for the journal.
    public struct Report: Equatable {
        /// The apps told of the sleep, in the order told.
        public var told: [AppName]
        /// The apps whose acknowledgement did not come in time, by name.
        public var late: [AppName]
        /// How long the apps were waited for at most.
        public var budget: Duration
        /// From the announcement to the store on disk.
        public var elapsed: Duration
    }

    /// What the shell does, in the order given.
    public enum Action {
        /// Ask logind for the delay inhibitor; tell ``inhibitorTaken(_:cause:)`` what it granted. `cause`: why it is
        /// asked for again (logind or the bus came back), `nil` at start and on a wake.
        case takeInhibitor(cause: String?)
        /// The inhibitor granted is held now (`cause`: as asked for).
        case inhibitorHeld(cause: String?)
        /// Close the inhibitor: logind may go on.
        case releaseInhibitor(Inhibitor)
        /// Tell the active apps (``SleepInterruption/appsToInterrupt(_:)``) willResignActive, reason `sleep`; tell
        /// ``told(_:now:)`` who was told.
        case interruptApps
        /// Wait for each app's acknowledgement up to its number, no later than `deadline`; tell
        /// ``acknowledged(_:upTo:)`` or ``notAcknowledged(_:)`` for each.
        case waitForAcknowledgements([(app: AppName, sequence: UInt64)], until: Instant)
        /// Put every pending write on disk; tell ``flushed(now:)``.
        case flushStore
        /// The preparation is done: the journal hears what it came to.
        case wentToSleep(Report)
        /// Make these apps active again (didBecomeActive, reason `wake`), those still inactive for the sleep.
        case wakeApps([AppName])
        /// Ask logind whether it is preparing for sleep; tell ``preparingForSleep(_:cause:)``.
        case askPreparingForSleep(cause: String)
        /// The wake's signal was lost: announce the wake, in the signals' order.
        case catchUpWake(cause: String)
    }

    /// A sleep being prepared for.
    fileprivate struct Preparation {
        var started: Instant
        /// How long the apps are waited for, at most.
        var budget: Duration = .zero
        /// The inhibitor held when the sleep was announced, let go once the store is on disk.
        var inhibitor: Inhibitor?
        var told: [AppName] = []
        var deadline: Instant?
        /// The apps waited for, with the number each must acknowledge.
        var waiting: [AppName: UInt64] = [:]
        var late: Set<AppName> = []
        var flushing = false
        /// A wake announced meanwhile, handled once the preparation is done.
        var wakeWaiting = false
    }

    /// logind's InhibitDelayMaxUSec, as last read.
    public var delay: Duration
    /// The inhibitor held while awake.
    public private(set) var inhibitor: Inhibitor?
    /// A sleep was announced and no wake since.
    public private(set) var sleeping = false
    /// The apps the sleeps since the last wake interrupted.
    public private(set) var interrupted: Set<AppName> = []
    private var preparation: Preparation?

    /// - Parameter delay: logind's InhibitDelayMaxSec= until the property is read.
    public init(delay: Duration) {
        self.delay = delay
    }

    /// How long the apps' acknowledgements are waited for within logind's `delay`: three quarters, the rest left for
    /// the flush and a margin.
    public static func budget(for delay: Duration) -> Duration {
        delay * 3 / 4
    }

    /// A preparation runs: between the announcement and the store on disk.
    public var preparing: Bool { self.preparation != nil }

    // MARK: The inhibitor

    /// The daemon starts following sleep, or logind or the bus came back (`cause`).
    public mutating func start(cause: String? = nil) -> [Action] {
        if let cause, self.sleeping { return [.askPreparingForSleep(cause: cause)] }
        return self.takeInhibitor(cause: cause)
    }

    /// logind granted the inhibitor asked for with `cause`.
    public mutating func inhibitorTaken(_ inhibitor: Inhibitor, cause: String?) -> [Action] {
        // Another call took one first, or a sleep began meanwhile (logind would not delay it again).
        guard self.inhibitor == nil, !self.sleeping else { return [.releaseInhibitor(inhibitor)] }
        self.inhibitor = inhibitor
        return [.inhibitorHeld(cause: cause)]
    }

    /// The daemon stops following sleep: the inhibitor held while awake is let go (one a preparation holds is let go
    /// at its end).
    public mutating func stop() -> [Action] {
        guard let inhibitor = self.inhibitor else { return [] }
        self.inhibitor = nil
        return [.releaseInhibitor(inhibitor)]
    }

    private func takeInhibitor(cause: String?) -> [Action] {
        self.inhibitor == nil && !self.sleeping ? [.takeInhibitor(cause: cause)] : []
    }

    // MARK: The sleep

    /// logind announced the sleep (PrepareForSleep(true)).
    public mutating func sleepAnnounced(now: Instant) -> [Action] {
        // The same sleep's signal handled twice would tell no one new; the shell handles signals in turn.
        guard self.preparation == nil else { return [] }
        self.sleeping = true
        self.preparation = Preparation(started: now, inhibitor: self.inhibitor)
        self.inhibitor = nil
        return [.interruptApps]
    }

    /// The apps in `told` heard willResignActive for the sleep.
    public mutating func told(_ told: [SleepInterruption], now: Instant) -> [Action] {
        guard var preparation = self.preparation, preparation.deadline == nil, !preparation.flushing else { return [] }
        preparation.budget = Self.budget(for: self.delay)
        let deadline = now.advanced(by: preparation.budget)
        preparation.told = told.map(\.app)
        preparation.deadline = deadline
        var waits: [(app: AppName, sequence: UInt64)] = []
        for app in told {
            self.interrupted.insert(app.app)
            guard app.attached, preparation.waiting[app.app] == nil else { continue }
            preparation.waiting[app.app] = app.sequence
            waits.append((app.app, app.sequence))
        }
        self.preparation = preparation
        return waits.isEmpty ? self.flushIfDone() : [.waitForAcknowledgements(waits, until: deadline)]
    }

    /// `app` acknowledged everything up to `sequence` while it was waited for.
    public mutating func acknowledged(_ app: AppName, upTo sequence: UInt64) -> [Action] {
        guard let wanted = self.preparation?.waiting[app], sequence >= wanted else { return [] }
        self.preparation?.waiting[app] = nil
        return self.flushIfDone()
    }

    /// The wait for `app` ended without its acknowledgement: its time ran out, or its process is gone.
    public mutating func notAcknowledged(_ app: AppName) -> [Action] {
        guard self.preparation?.waiting.removeValue(forKey: app) != nil else { return [] }
        self.preparation?.late.insert(app)
        return self.flushIfDone()
    }

    /// The store's pending writes are on disk: the inhibitor is let go, and the wake announced meanwhile follows.
    public mutating func flushed(now: Instant) -> [Action] {
        guard let preparation = self.preparation, preparation.flushing else { return [] }
        self.preparation = nil
        var actions: [Action] = []
        if let inhibitor = preparation.inhibitor { actions.append(.releaseInhibitor(inhibitor)) }
        actions.append(.wentToSleep(Report(
            told: preparation.told,
            late: preparation.late.sorted(),
            budget: preparation.budget,
            elapsed: preparation.started.duration(to: now)
        )))
        if preparation.wakeWaiting { actions += self.wakeAnnounced(now: now) }
        return actions
    }

    private mutating func flushIfDone() -> [Action] {
        guard var preparation = self.preparation, preparation.deadline != nil, preparation.waiting.isEmpty,
            !preparation.flushing
        else { return [] }
        preparation.flushing = true
        self.preparation = preparation
        return [.flushStore]
    }

    // MARK: The wake

    /// logind announced the wake (PrepareForSleep(false)), or the shell caught up with one whose signal was lost.
    public mutating func wakeAnnounced(now: Instant) -> [Action] {
        if self.preparation != nil {
            self.preparation?.wakeWaiting = true
            return []
        }
        self.sleeping = false
        let woken = self.interrupted.sorted()
        self.interrupted.removeAll()
        return self.takeInhibitor(cause: nil) + [.wakeApps(woken)]
    }

    /// logind answered whether it is preparing for sleep (`nil`: it could not be asked), after it or the bus came
    /// back with `cause`.
    public mutating func preparingForSleep(_ preparing: Bool?, cause: String) -> [Action] {
        guard preparing == false, self.sleeping else { return [] }
        return [.catchUpWake(cause: cause)]
    }
}

extension SleepPreparation: Sendable where Inhibitor: Sendable {}
extension SleepPreparation.Action: Sendable where Inhibitor: Sendable {}
extension SleepPreparation.Report: Sendable {}
extension SleepPreparation.Preparation: Sendable where Inhibitor: Sendable {}
