/// What the shell must do after an input to ``AppLifecycle``, in order.
public enum LifecycleEffect: Sendable, Hashable {
    /// Send the callback to the app, numbered `sequence` in its stream; `task` names the background task a
    /// backgroundTaskWillExpire is about.
    case deliver(LifecycleCallback, sequence: UInt64, task: Int? = nil)
    /// The app changed state: log it, tell monitors.
    case transition(from: AppState, to: AppState, reason: TransitionReason)
    /// Kill the app's process at once (SIGKILL), without a word to it: a purge, or a missed deadline.
    case kill(reason: TransitionReason)
    /// End the app's process after willTerminate (SIGTERM, then SIGKILL after a grace period).
    case terminate(reason: TransitionReason)
    /// Its launches failed ``LifecycleTimings/failedLaunchLimit`` times in a row: the daemon launches it no more by
    /// itself until an operator does (log it, once).
    case launchesHeld(failedInARow: Int)
}

/// A request that does not fit the app's state. Nothing changed when one is thrown.
public enum LifecycleError: Error, Sendable, Hashable, CustomStringConvertible {
    case notRunning(AppState)
    case alreadyRunning(AppState)
    case notInForeground(AppState)
    case notActive(AppState)
    case notInterrupted
    case alreadyInterrupted
    case notSuspended(AppState)
    case noSuchTask(Int)
    case tooManyTasks(limit: Int)
    /// An acknowledgement of a number the app was not sent: `next` is the one the next callback or event carries.
    case notSent(UInt64, next: UInt64)

    public var description: String {
        switch self {
        case .notRunning(let state): return "the app is not running (it is \(state.rawValue))"
        case .alreadyRunning(let state): return "the app is already running (it is \(state.rawValue))"
        case .notInForeground(let state): return "the app is not in the foreground (it is \(state.rawValue))"
        case .notActive(let state): return "the app is not active (it is \(state.rawValue))"
        case .notInterrupted: return "the app is not interrupted"
        case .alreadyInterrupted: return "the app is already interrupted"
        case .notSuspended(let state): return "only a suspended app can be purged (it is \(state.rawValue))"
        case .noSuchTask(let id): return "no open background task \(id)"
        case .tooManyTasks(let limit): return "the app already holds \(limit) background tasks"
        case .notSent(let sequence, let next): return "\(sequence) was not sent to the app: the next number it gets is \(next)"
        }
    }
}

/// One app's lifecycle, as a pure state machine: requests and the passing of time go in, effects come out.
///
/// It keeps no clock: every input carries `now`, and ``nextDeadline`` says when the shell must next call
/// ``timePassed(now:)``. The callback orders are those seed 004 observed on a device (DESIGN.md §1).
public struct AppLifecycle<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public private(set) var state: AppState = .notRunning
    public var traits: AppTraits
    public var timings: LifecycleTimings
    /// Background tasks an app may hold at once: each is warned separately when the budget runs out.
    public static var maximumTasks: Int { 64 }
    /// Open background tasks by id, with their names.
    public private(set) var tasks: [Int: String] = [:]
    /// The app is inactive because of an interruption (alert, call, sleep, lock), not a transition.
    public private(set) var interrupted = false
    /// The app was woken from suspension into the background for its events (``wakeIntoBackground(now:)``): it goes
    /// back to suspended once it has acknowledged everything it was sent and closed its tasks, or when its budget
    /// runs out.
    public private(set) var woken = false
    /// The first number the app's stream gave out after its last wake for events.
    public private(set) var wokenAtSequence: UInt64 = 0

    /// The highest number the app acknowledged (0: none since this run of the daemon took it up).
    public private(set) var acknowledgedUpTo: UInt64 = 0

    /// The number the app's stream gives next, to a callback or an event (the app's ``Inbox`` numbers its events
    /// from it): one counter, so that an acknowledgement up to a number covers both.
    public var nextSequence: UInt64 = 1
    private var nextTaskID = 1
    /// Callbacks that must be acknowledged, with their deadline (`nil`: none, `AcknowledgeTimeoutSec=infinity`;
    /// an unacknowledged didEnterBackground still keeps the app from being suspended).
    private var awaiting: [(sequence: UInt64, callback: LifecycleCallback, deadline: Instant?)] = []
    /// When the background task budget runs out; set while the app is in the background.
    private var budgetEnds: Instant?
    private var expiryWarned = false

    /// The first number any run of the daemon gave out: a number below it was never sent.
    public let earliestSequence: UInt64

    /// Its launches that ended before it finished launching, in a row (crash-loop protection).
    public private(set) var failedLaunches = FailedLaunches()

    /// Whether it is launching: it has not acknowledged didFinishLaunching yet.
    public var isFinishingLaunch: Bool { self.awaiting.contains { $0.callback == .didFinishLaunching } }

    /// Whether launches the daemon would make by itself (for an event, a notification's answer, a URL) are held back:
    /// its launches failed ``LifecycleTimings/failedLaunchLimit`` times in a row.
    public var launchesHeld: Bool { self.failedLaunches.holdsLaunches(limit: self.timings.failedLaunchLimit) }

    /// - Parameters:
    ///   - firstSequence: the number of the first callback; events delivered to the app are numbered from the same
    ///     counter (``reserveSequence()``), and a daemon that restarts starts past every number it used.
    ///   - earliestSequence: the first number of the daemon's first run.
    public init(
        traits: AppTraits = AppTraits(),
        timings: LifecycleTimings = LifecycleTimings(),
        firstSequence: UInt64 = 1,
        earliestSequence: UInt64 = 1
    ) {
        self.traits = traits
        self.timings = timings
        self.nextSequence = firstSequence
        self.earliestSequence = earliestSequence
    }

    /// Takes the next number of the app's stream for something other than a callback (an event).
    public mutating func reserveSequence() -> UInt64 {
        defer { self.nextSequence += 1 }
        return self.nextSequence
    }

    /// Whether the app runs code now and so receives what is sent to it at once: not suspended, not stopped.
    public var receivesAtOnce: Bool { self.state.isRunning && self.state != .suspended }

    /// The earliest time at which ``timePassed(now:)`` has something to do.
    public var nextDeadline: Instant? {
        var deadlines = self.awaiting.compactMap(\.deadline)
        if let budgetEnds = self.budgetEnds, !self.tasks.isEmpty || self.woken {
            deadlines.append(self.expiryWarned ? budgetEnds : budgetEnds.advanced(by: .zero - self.timings.expiryWarning))
        }
        return deadlines.min()
    }

    /// The didEnterBackground the app has not acknowledged yet, with its deadline (`nil`: none); `nil` when it
    /// has acknowledged it.
    public var unacknowledgedDidEnterBackground: (sequence: UInt64, deadline: Instant?)? {
        self.awaiting.first { $0.callback == .didEnterBackground }.map { ($0.sequence, $0.deadline) }
    }

    /// Seconds of background time left, as BeginBackgroundTask reports it; the whole budget in the foreground;
    /// `nil` when there is no budget (``LifecycleTimings/backgroundTaskBudget``).
    public func backgroundTimeRemaining(now: Instant) -> Duration? {
        guard let budgetEnds = self.budgetEnds else { return self.timings.backgroundTaskBudget }
        return max(.zero, now.duration(to: budgetEnds))
    }

    // MARK: Requests

    /// Starts the app: willFinishLaunching and didFinishLaunching, then didBecomeActive (foreground) or
    /// didEnterBackground (background). Only didFinishLaunching is awaited: its deadline covers both.
    public mutating func launch(_ destination: LaunchDestination, now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.state == .notRunning else { throw .alreadyRunning(self.state) }
        var effects = self.move(to: .inactive, reason: .launch)
        effects.append(self.deliver(.willFinishLaunching))
        effects.append(self.deliver(.didFinishLaunching, awaited: .some(self.timings.launchAcknowledgement.map(now.advanced(by:)))))
        switch destination {
        case .foreground:
            effects += self.move(to: .active, reason: .launch)
            effects.append(self.deliver(.didBecomeActive))
        case .background:
            effects += self.enterBackground(now: now, reason: .launch)
        }
        return effects
    }

    /// A launch that never reached the app: its unit did not start, or no process attached in time.
    public mutating func launchFailed() -> [LifecycleEffect] {
        self.countFailedLaunch()
    }

    /// An operator launched the app: launches held back after failures are let go, and it is counted afresh.
    public mutating func launchesAllowed() {
        self.failedLaunches.cleared()
    }

    /// Wakes a suspended app into the background for what it was sent while it ran no code, as iOS wakes an app for a
    /// content-available notification: no callback (it does not come to the foreground), the held events follow, and
    /// the background budget runs from now, with backgroundTaskWillExpire before it ends.
    /// - Parameter budget: how long it runs for this wake (a refresh's own budget); the background task budget when
    ///   `nil`.
    public mutating func wakeIntoBackground(
        now: Instant,
        reason: TransitionReason = .eventWake,
        budget: Duration? = nil
    ) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.state == .suspended else { throw .notSuspended(self.state) }
        let effects = self.move(to: .background, reason: reason)
        self.woken = true
        self.wokenAtSequence = self.nextSequence
        self.budgetEnds = (budget ?? self.timings.backgroundTaskBudget).map(now.advanced(by:))
        self.expiryWarned = false
        return effects
    }

    /// Brings the app to the foreground: willEnterForeground (from the background), then didBecomeActive.
    public mutating func activate(now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        switch self.state {
        case .notRunning: throw .notRunning(self.state)
        case .active: return []
        case .inactive:
            guard !self.interrupted else { throw .alreadyInterrupted }
            return self.move(to: .active, reason: .activate) + [self.deliver(.didBecomeActive)]
        case .background, .suspended:
            self.leaveBackground()
            var effects = self.move(to: .inactive, reason: .activate)
            effects.append(self.deliver(.willEnterForeground))
            effects += self.move(to: .active, reason: .activate)
            effects.append(self.deliver(.didBecomeActive))
            return effects
        }
    }

    /// Sends the app to the background (the home button, another app brought forward): willResignActive unless an
    /// interruption already sent it, then didEnterBackground.
    public mutating func deactivate(now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.state.isForeground else { throw .notInForeground(self.state) }
        return self.leaveForeground(now: now, reason: .deactivate)
    }

    /// Follows where the app's scenes put it, as their presence changes from `previous` to `presence`
    /// (``SceneEffect/presence(from:to:)``), with the app-level callbacks of each step: toward active
    /// (willEnterForeground from the background, then didBecomeActive when they are active), or away from it
    /// (willResignActive, then didEnterBackground when they are off screen; then suspended by the usual rules). A
    /// change toward the foreground never takes the app away from it, nor the other way: an app its user or an
    /// operator brought forward before it had a scene stays where it is until its scenes leave it. A not-running
    /// app has no scenes to follow: nothing.
    ///
    /// An app that follows its scenes is interrupted through them (``AppScenes/interruption(_:)``, which makes its
    /// focused scene inactive and so the app), not by ``interruptionBegan(now:reason:)``: its scenes say where it is,
    /// and an interruption of the app's own would end into a foreground its scenes may have left meanwhile.
    public mutating func follow(
        _ presence: ScenePresence,
        from previous: ScenePresence,
        reason: TransitionReason = .scenes,
        now: Instant
    ) -> [LifecycleEffect] {
        guard self.state.isRunning, presence != previous else { return [] }
        var effects: [LifecycleEffect] = []
        if presence > previous {
            if !self.state.isForeground {
                self.leaveBackground()
                effects += self.move(to: .inactive, reason: reason)
                effects.append(self.deliver(.willEnterForeground))
            }
            if presence == .active, self.state == .inactive {
                self.interrupted = false
                effects += self.move(to: .active, reason: reason)
                effects.append(self.deliver(.didBecomeActive))
            }
        } else if self.state.isForeground {
            if presence == .offScreen {
                effects += self.leaveForeground(now: now, reason: reason)
            } else if self.state == .active {
                effects += self.move(to: .inactive, reason: reason)
                effects.append(self.deliver(.willResignActive))
            }
        }
        return effects
    }

    /// An alert, a call, sleep or the screen lock takes the foreground from an active app: willResignActive.
    /// `reason` is the journal's: `sleep` when the system goes to sleep.
    public mutating func interruptionBegan(
        now: Instant,
        reason: TransitionReason = .interruptionBegan
    ) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.state == .active else {
            if self.interrupted { throw .alreadyInterrupted }
            throw .notActive(self.state)
        }
        self.interrupted = true
        return self.move(to: .inactive, reason: reason) + [self.deliver(.willResignActive)]
    }

    /// The interruption is over and the app has the foreground again: didBecomeActive.
    public mutating func interruptionEnded(
        now: Instant,
        reason: TransitionReason = .interruptionEnded
    ) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.interrupted, self.state == .inactive else { throw .notInterrupted }
        self.interrupted = false
        return self.move(to: .active, reason: reason) + [self.deliver(.didBecomeActive)]
    }

    /// Ends the app. A running app that can run code hears willTerminate first; a suspended one runs no code and
    /// is killed without a word.
    public mutating func terminate(now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        switch self.state {
        case .notRunning: throw .notRunning(self.state)
        case .suspended: return self.stop(reason: .terminate, effect: .kill(reason: .terminate))
        case .inactive, .active, .background:
            let willTerminate = self.deliver(.willTerminate)
            return [willTerminate] + self.stop(reason: .terminate, effect: .terminate(reason: .terminate))
        }
    }

    /// Reclaims a suspended app's memory: it is killed with no callback at all, as seed 004 observed.
    public mutating func purge(now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.state == .suspended else { throw .notSuspended(self.state) }
        return self.stop(reason: .purge, effect: .kill(reason: .purge))
    }

    /// Takes up the state an earlier run of the daemon recorded for an app whose process outlived it: no callback,
    /// no transition (the app went through them then). What that run kept only in memory is gone: background
    /// tasks, and the deadlines of callbacks not yet acknowledged. So an app recorded in the background without a
    /// background mode is suspended, as when its last task ends; an interruption stays until it is ended.
    /// - Returns: the state taken up (`nil` for a recorded `notRunning`, which leaves the app as it is).
    public mutating func restore(_ recorded: AppState, interrupted: Bool) -> AppState? {
        guard self.state == .notRunning, recorded.isRunning else { return nil }
        switch recorded {
        case .background where self.traits.backgroundModes.isEmpty: self.state = .suspended
        default: self.state = recorded
        }
        self.interrupted = interrupted && self.state == .inactive
        return self.state
    }

    /// The app's process is gone (its stream closed): it is not running, and is told nothing. With
    /// `notReattached`: the daemon lost the process instead (it outlived a restart of the daemon and never attached
    /// again), and no longer counts it as the app.
    public mutating func processExited(now: Instant, reason: TransitionReason = .processExited) -> [LifecycleEffect] {
        guard self.state.isRunning else { return [] }
        let from = self.state
        let failed = self.isFinishingLaunch ? self.countFailedLaunch() : []
        self.reset()
        return [.transition(from: from, to: .notRunning, reason: reason)] + failed
    }

    /// An app acknowledges only numbers it could have been sent: one past them, or before the daemon's first run,
    /// is a mistake of the client's, refused rather than taken to acknowledge what comes later. A number of an
    /// earlier run (below this run's first) is taken: a process that outlived that run may still acknowledge it, and
    /// it acknowledges nothing now.
    public func checkAcknowledgement(upTo sequence: UInt64) throws(LifecycleError) {
        guard sequence >= self.earliestSequence, sequence < self.nextSequence else {
            throw .notSent(sequence, next: self.nextSequence)
        }
    }

    /// The app has handled every callback up to `sequence`: their deadlines are met. An acknowledged
    /// didEnterBackground lets an app with nothing left to do be suspended.
    public mutating func acknowledge(upTo sequence: UInt64, now: Instant) -> [LifecycleEffect] {
        self.acknowledgedUpTo = max(self.acknowledgedUpTo, sequence)
        let met = self.awaiting.filter { $0.sequence <= sequence }
        self.awaiting.removeAll { $0.sequence <= sequence }
        if met.contains(where: { $0.callback == .didFinishLaunching }) { self.failedLaunches.cleared() }
        guard met.contains(where: { $0.callback == .didEnterBackground }) || self.woken else { return [] }
        return self.suspendIfIdle(now: now)
    }

    /// Opens a background task; returns its id and the background time remaining.
    public mutating func beginBackgroundTask(
        name: String,
        now: Instant
    ) throws(LifecycleError) -> (id: Int, remaining: Duration?) {
        guard self.state.isRunning, self.state != .suspended else { throw .notRunning(self.state) }
        guard self.tasks.count < Self.maximumTasks else { throw .tooManyTasks(limit: Self.maximumTasks) }
        let id = self.nextTaskID
        self.nextTaskID += 1
        self.tasks[id] = name
        return (id, self.backgroundTimeRemaining(now: now))
    }

    /// Closes a background task; closing the last one in the background lets the app be suspended.
    public mutating func endBackgroundTask(_ id: Int, now: Instant) throws(LifecycleError) -> [LifecycleEffect] {
        guard self.tasks.removeValue(forKey: id) != nil else { throw .noSuchTask(id) }
        return self.suspendIfIdle(now: now)
    }

    /// Acts on every deadline that has passed: a callback not acknowledged in time kills the app; the background
    /// budget first warns each open task, then ends them all.
    public mutating func timePassed(now: Instant) -> [LifecycleEffect] {
        if let missed = self.awaiting.first(where: { $0.deadline.map { $0 <= now } ?? false }) {
            let reason: TransitionReason =
                missed.callback == .didFinishLaunching ? .launchNotAcknowledged : .backgroundNotAcknowledged
            return self.stop(reason: reason, effect: .kill(reason: reason))
        }
        guard let budgetEnds = self.budgetEnds, !self.tasks.isEmpty || self.woken else { return [] }
        var effects: [LifecycleEffect] = []
        if !self.expiryWarned, now >= budgetEnds.advanced(by: .zero - self.timings.expiryWarning) {
            self.expiryWarned = true
            // A wake with no task open is warned once, for the wake itself: no task names it.
            if self.tasks.isEmpty { effects.append(self.deliver(.backgroundTaskWillExpire)) }
            for id in self.tasks.keys.sorted() {
                effects.append(self.deliver(.backgroundTaskWillExpire, task: id))
            }
        }
        if now >= budgetEnds {
            self.tasks.removeAll()
            if self.timings.terminateWhenBudgetRunsOut {
                effects.append(self.deliver(.willTerminate))
                return effects + self.stop(reason: .backgroundTasksExpired, effect: .terminate(reason: .backgroundTasksExpired))
            }
            if self.traits.backgroundModes.isEmpty {
                effects += self.move(to: .suspended, reason: .backgroundTasksExpired)
                self.budgetEnds = nil
                self.woken = false
            }
        }
        return effects
    }

    // MARK: Steps

    private mutating func move(to state: AppState, reason: TransitionReason) -> [LifecycleEffect] {
        let from = self.state
        self.state = state
        return [.transition(from: from, to: state, reason: reason)]
    }

    /// - Parameter awaited: for a callback the app must acknowledge, its deadline, itself `nil` when there is none.
    private mutating func deliver(
        _ callback: LifecycleCallback,
        awaited: Instant?? = nil,
        task: Int? = nil
    ) -> LifecycleEffect {
        let sequence = self.nextSequence
        self.nextSequence += 1
        if let awaited { self.awaiting.append((sequence, callback, awaited)) }
        return .deliver(callback, sequence: sequence, task: task)
    }

    /// From inactive into the background. An exits-on-suspend app is terminated instead.
    private mutating func enterBackground(now: Instant, reason: TransitionReason) -> [LifecycleEffect] {
        if self.traits.exitsOnSuspend {
            let willTerminate = self.deliver(.willTerminate)
            return [willTerminate] + self.stop(reason: .exitsOnSuspend, effect: .terminate(reason: .exitsOnSuspend))
        }
        var effects = self.move(to: .background, reason: reason)
        self.budgetEnds = self.timings.backgroundTaskBudget.map(now.advanced(by:))
        self.expiryWarned = false
        effects.append(self.deliver(.didEnterBackground, awaited: .some(self.timings.backgroundAcknowledgement.map(now.advanced(by:)))))
        return effects
    }

    /// From the foreground into the background: willResignActive unless it is not active, then didEnterBackground.
    private mutating func leaveForeground(now: Instant, reason: TransitionReason) -> [LifecycleEffect] {
        var effects: [LifecycleEffect] = []
        if self.state == .active {
            effects += self.move(to: .inactive, reason: reason)
            effects.append(self.deliver(.willResignActive))
        }
        self.interrupted = false
        return effects + self.enterBackground(now: now, reason: reason)
    }

    private mutating func leaveBackground() {
        self.woken = false
        self.budgetEnds = nil
        self.expiryWarned = false
        self.awaiting.removeAll { $0.callback == .didEnterBackground }
    }

    /// A backgrounded app with no task, no mode and didEnterBackground handled runs no more code; a woken one, once
    /// it has also acknowledged everything it was sent.
    private mutating func suspendIfIdle(now: Instant) -> [LifecycleEffect] {
        guard self.state == .background, self.tasks.isEmpty, self.traits.backgroundModes.isEmpty,
            !self.awaiting.contains(where: { $0.callback == .didEnterBackground }),
            !self.woken || self.acknowledgedUpTo + 1 >= self.nextSequence
        else { return [] }
        self.woken = false
        self.budgetEnds = nil
        return self.move(to: .suspended, reason: .backgroundWorkDone)
    }

    private mutating func stop(reason: TransitionReason, effect: LifecycleEffect) -> [LifecycleEffect] {
        let from = self.state
        // Killed for not finishing its launch in time counts as a launch that failed; ended on request does not.
        let failed = self.isFinishingLaunch && reason == .launchNotAcknowledged ? self.countFailedLaunch() : []
        self.reset()
        return [effect, .transition(from: from, to: .notRunning, reason: reason)] + failed
    }

    private mutating func countFailedLaunch() -> [LifecycleEffect] {
        guard self.failedLaunches.failed(limit: self.timings.failedLaunchLimit) else { return [] }
        return [.launchesHeld(failedInARow: self.failedLaunches.inARow)]
    }

    private mutating func reset() {
        self.state = .notRunning
        self.tasks.removeAll()
        self.interrupted = false
        self.woken = false
        self.awaiting.removeAll()
        self.budgetEnds = nil
        self.expiryWarned = false
    }
}
