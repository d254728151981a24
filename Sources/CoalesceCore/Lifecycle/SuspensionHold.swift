/// How one app's process is held while it is suspended (DESIGN.md §5): when it is stopped or its unit frozen, when
/// it is continued or thawed, when freezing falls back to SIGSTOP, and when a failed call to systemd is made again.
///
/// The shell feeds it the app as it is after each change (``Situation``), the end of the delay, and systemd's
/// answers, and carries out the ``Action``s it returns: signals, unit calls, the delay's timer, journal entries. One
/// call to systemd is with it at a time; the next waits for its answer. `Process` is the shell's handle of a process:
/// equal handles are the same process.
public struct SuspensionHold<Process: Equatable> {
    /// A process stopped (SIGSTOP) or frozen (its unit, through systemd).
    public struct Held {
        public var process: Process
        public var how: ProcessHold
        /// The unit frozen, for ``ProcessHold/frozen``.
        public var unit: String?

        public init(process: Process, how: ProcessHold, unit: String? = nil) {
            self.process = process
            self.how = how
            self.unit = unit
        }
    }

    /// The app as it is now, after the change the shell just made to it.
    public struct Situation {
        public var state: AppState
        public var mode: SuspensionMode
        /// The process that runs the app: the attached one, or one taken up after a restart that has not attached.
        public var process: Process?
        /// The attached process, the only one that is held (one taken up after a restart must attach first).
        public var attached: Process?
        /// The highest number its stream was given (callbacks and events share the counter).
        public var lastSent: UInt64
        /// The daemon's run's first number: before its first Ack, the app has acknowledged every number before it,
        /// which this run never sent.
        public var firstSequence: UInt64
        /// Processes the same change kills: not continued first.
        public var killing: [Process]

        public init(
            state: AppState,
            mode: SuspensionMode,
            process: Process?,
            attached: Process?,
            lastSent: UInt64,
            firstSequence: UInt64,
            killing: [Process] = []
        ) {
            self.state = state
            self.mode = mode
            self.process = process
            self.attached = attached
            self.lastSent = lastSent
            self.firstSequence = firstSequence
            self.killing = killing
        }
    }

    /// Why a process is stopped rather than frozen.
    public enum StopReason: Equatable {
        /// Its mode is `stop`.
        case mode
        /// Its mode is `freeze`, and it does not run in its launch unit.
        case notInUnit(String)
        /// The unit could not be frozen (refused, or FreezeUnit failed): `reason`.
        case notFrozen(unit: String, reason: String)
    }

    /// How systemd answered a unit call.
    public enum UnitAnswer {
        /// Done in that time: the call's round trip, which systemd answers once the kernel has frozen or thawed the
        /// cgroup.
        case done(Duration)
        /// A freeze refused before it was asked (the watchdog), with why.
        case refused(String)
        /// A thaw failed, but the process runs: someone else thawed the unit.
        case thawedMeanwhile
        /// The call failed, with why.
        case failed(String)
    }

    public enum Action {
        /// The delay after which the process is held starts, or (`cancel`) no longer runs.
        case armDelay
        case cancelDelay
        /// SIGSTOP.
        case stop(Process, StopReason)
        /// SIGCONT, ahead of whatever the change that released it sends.
        case `continue`(Process)
        case freeze(unit: String)
        case thaw(unit: String)
        /// The failed unit call is made again after a while (``retry()``).
        case retryLater
        /// A held process was let go because its app no longer is to be held (not because it was killed).
        case released
        /// For the journal.
        case frozen(unit: String, Duration)
        case thawed(unit: String, Duration)
        /// The first of a run of failed thaws; the rest are not said.
        case cannotThaw(unit: String, reason: String)
    }

    /// The highest number the app acknowledged: it is held only once it has acknowledged all it was sent.
    public var acknowledged: UInt64 = 0
    /// The delay after which the app is held runs.
    public private(set) var delayArmed = false
    /// Its process as held now (for a unit: asked to be frozen, or frozen).
    public private(set) var held: Held?
    /// The unit systemd froze for the app and has not thawed yet, by the last call it answered.
    public private(set) var frozenUnit: String?
    /// A FreezeUnit or ThawUnit call for the app is with systemd.
    public private(set) var unitCallPending = false
    /// ThawUnit calls that failed in a row.
    public private(set) var thawRetries = 0

    public init() {}

    /// A process an earlier run of the daemon left stopped or frozen, taken up at start: `held` while its app is
    /// suspended, and `frozenUnit` the unit still frozen (thawed by the first ``retry()`` when not held).
    public mutating func takeUp(held: Held?, frozenUnit: String?) {
        self.held = held
        self.frozenUnit = frozenUnit
    }

    /// Whether the app's process is to be held now (``SuspensionRule``).
    public func holds(_ situation: Situation) -> Bool {
        SuspensionRule.holds(
            state: situation.state,
            mode: situation.mode,
            attached: situation.attached != nil,
            acknowledged: max(self.acknowledged, situation.firstSequence - 1),
            lastSent: situation.lastSent
        )
    }

    /// After any change to the app: a held process its app no longer holds is continued (or its unit thawed), one
    /// killed is left to die held, and the delay starts or stops as the rule now says.
    public mutating func settle(_ situation: Situation) -> [Action] {
        var actions: [Action] = []
        if let held = self.held, situation.state != .suspended || held.process != situation.process {
            self.held = nil
            if !situation.killing.contains(held.process) {
                if held.how == .stopped { actions.append(.continue(held.process)) }
                actions.append(.released)
            }
            // Frozen, killed or not: its unit is thawed (SIGKILL works on frozen tasks, and the kill goes first).
            if held.how == .frozen { actions += self.driveUnit() }
        }
        let holds = self.holds(situation)
        if holds, self.held == nil, !self.delayArmed {
            self.delayArmed = true
            actions.append(.armDelay)
        } else if !holds, self.delayArmed {
            self.delayArmed = false
            actions.append(.cancelDelay)
        }
        return actions
    }

    /// The delay has passed: the attached process is frozen (mode `freeze`, running in its launch unit) or stopped,
    /// if the app is still to be held and no call to systemd is on its way.
    /// - Parameters:
    ///   - launchUnit: the app's launch unit, if it has one.
    ///   - runsInUnit: whether the attached process runs in it, read by the shell before it decided.
    public mutating func delayEnded(_ situation: Situation, launchUnit: String?, runsInUnit: Bool) -> [Action] {
        self.delayArmed = false
        guard self.held == nil, self.holds(situation), let process = situation.attached, !self.unitCallPending else {
            // A thaw still with systemd: the delay starts again.
            return self.settle(situation)
        }
        guard situation.mode == .freeze, let unit = launchUnit else { return self.stop(process, .mode) }
        guard runsInUnit else { return self.stop(process, .notInUnit(unit)) }
        self.held = Held(process: process, how: .frozen, unit: unit)
        return self.driveUnit()
    }

    /// systemd answered the call made for `unit` (`freezing`: FreezeUnit, else ThawUnit).
    public mutating func unitAnswered(freezing: Bool, unit: String, _ answer: UnitAnswer, _ situation: Situation) -> [Action] {
        self.unitCallPending = false
        var actions: [Action] = []
        switch (freezing, answer) {
        case (true, .done(let time)):
            self.frozenUnit = unit
            actions.append(.frozen(unit: unit, time))
        case (false, .done(let time)):
            self.frozenUnit = nil
            self.thawRetries = 0
            actions.append(.thawed(unit: unit, time))
        case (true, .refused(let reason)):
            actions += self.freezeFailed(unit: unit, reason: reason)
        case (true, .failed(let reason)):
            actions += self.freezeFailed(unit: unit, reason: "FreezeUnit failed: \(reason)")
        case (false, .thawedMeanwhile):
            self.frozenUnit = nil
            self.thawRetries = 0
        case (false, .failed(let reason)):
            // Still frozen (the bus lost for a moment, systemd busy): asked again, said once.
            if self.thawRetries == 0 { actions.append(.cannotThaw(unit: unit, reason: reason)) }
            self.thawRetries += 1
            return actions + [.retryLater]
        case (true, .thawedMeanwhile), (false, .refused):
            return actions  // answers those calls do not get
        }
        // What the app's state asks now may differ from what the call did (woken while it was frozen).
        return actions + self.driveUnit() + self.settle(situation)
    }

    /// Asks systemd again for what the app's state wants of its unit, after a call that failed (or, at start, for a
    /// unit an earlier run left frozen).
    public mutating func retry() -> [Action] {
        self.driveUnit()
    }

    /// Brings the unit to what the hold asks (frozen while held frozen, thawed otherwise), one call at a time.
    private mutating func driveUnit() -> [Action] {
        guard !self.unitCallPending else { return [] }
        let wanted = self.held.flatMap { $0.how == .frozen ? $0.unit : nil }
        if let unit = wanted, self.frozenUnit == nil {
            self.unitCallPending = true
            return [.freeze(unit: unit)]
        }
        if wanted == nil, let unit = self.frozenUnit {
            self.unitCallPending = true
            return [.thaw(unit: unit)]
        }
        return []
    }

    private mutating func stop(_ process: Process, _ reason: StopReason) -> [Action] {
        self.held = Held(process: process, how: .stopped)
        return [.stop(process, reason)]
    }

    /// A unit that could not be frozen: the process is stopped instead, if it is still to be held.
    private mutating func freezeFailed(unit: String, reason: String) -> [Action] {
        guard let held = self.held, held.how == .frozen else { return [] }
        return self.stop(held.process, .notFrozen(unit: unit, reason: reason))
    }
}

extension SuspensionHold: Sendable where Process: Sendable {}
extension SuspensionHold.Held: Sendable where Process: Sendable {}
extension SuspensionHold.Situation: Sendable where Process: Sendable {}
extension SuspensionHold.Action: Sendable where Process: Sendable {}
extension SuspensionHold.StopReason: Sendable {}
extension SuspensionHold.UnitAnswer: Sendable {}
