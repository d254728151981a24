/// Every app's scheduled background refreshes, and which of them run when (BGTaskScheduler, WorkManager), as a pure
/// value: the shell feeds it requests, the time and what the system says of each condition, and carries out the runs
/// it returns (the app woken or launched into the background for each) and their ends.
///
/// **Slots.** A refresh may run anywhere in its window, from when it is due to `flex` after; the plan runs it at the
/// first window end among the refreshes whose conditions hold, together with every other one already due then, as
/// Sailfish's aligned wake-ups do, so that several apps' refreshes cost one wake of the machine rather than one each.
/// A refresh whose conditions do not hold waits for them (a change of conditions is an input), past its window if it
/// must; one whose late policy is `skip` is skipped once its window has passed.
public struct RefreshPlan<App: Hashable & Comparable & Sendable>: Sendable {
    public struct Key: Sendable, Hashable, Comparable {
        public var app: App
        public var id: String

        public init(app: App, id: String) {
            self.app = app
            self.id = id
        }

        public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.app, lhs.id) < (rhs.app, rhs.id) }
    }

    /// A run in flight: when it started and when its budget ends.
    public struct Run: Sendable, Hashable {
        public var started: Double
        public var ends: Double

        public init(started: Double, ends: Double) {
            self.started = started
            self.ends = ends
        }
    }

    /// What ``due(now:conditions:)`` decided.
    public struct Slot: Sendable, Hashable {
        /// Refreshes to run now, in order: each is now running until its budget ends.
        public var runs: [Key] = []
        /// Runs whose budget ran out before the app said how they went: ended as ``RefreshOutcome/expired``.
        public var expired: [Key] = []
        /// Refreshes whose window passed under the `skip` policy: a periodic one waits for its next period, a
        /// one-time one is gone.
        public var skipped: [Key] = []
        /// When to ask again (seconds since the epoch); `nil`: not before an input.
        public var next: Double?
    }

    /// What ``schedule(_:for:keeping:)`` did when the app already had a refresh of that id.
    public enum Unique: Sendable, Hashable {
        /// The new request takes the old one's place (its failures and run are forgotten).
        case replace
        /// The old request stays, and the new one is dropped.
        case keep
    }

    /// How long after its window closed a `skip` refresh whose conditions hold may still run.
    public static var skipGrace: Double { 60 }

    public private(set) var tasks: [Key: RefreshTask] = [:]
    public private(set) var running: [Key: Run] = [:]

    public init() {}

    /// Takes up a refresh read back from the store.
    public mutating func restore(_ task: RefreshTask, of app: App) {
        self.tasks[Key(app: app, id: task.request.id)] = task
    }

    /// Schedules `request` for `app`. Returns the task the app now has under that id, and whether it is the new one.
    @discardableResult
    public mutating func schedule(_ request: RefreshRequest, for app: App, keeping unique: Unique = .replace) -> (task: RefreshTask, new: Bool) {
        let key = Key(app: app, id: request.id)
        if unique == .keep, let kept = self.tasks[key] { return (kept, false) }
        let task = RefreshTask(request: request)
        self.tasks[key] = task
        self.running[key] = nil
        return (task, true)
    }

    /// Cancels one refresh; returns whether there was one.
    @discardableResult
    public mutating func cancel(_ id: String, of app: App) -> Bool {
        let key = Key(app: app, id: id)
        self.running[key] = nil
        return self.tasks.removeValue(forKey: key) != nil
    }

    /// An app's refreshes, by id.
    public func refreshes(of app: App) -> [RefreshTask] {
        self.tasks.filter { $0.key.app == app }.sorted { $0.key < $1.key }.map(\.value)
    }

    /// Decides what runs now under `conditions`: expired runs end, windows passed under `skip` are skipped, and the
    /// slot opens when the first window among the refreshes that may run closes.
    public mutating func due(now: Double, conditions: SystemConditions) -> Slot {
        var slot = Slot()
        for (key, run) in self.running.sorted(by: { $0.key < $1.key }) where run.ends <= now {
            slot.expired.append(key)
            _ = self.finished(key, .expired, now: now)
        }
        for key in self.tasks.keys.sorted() where self.running[key] == nil {
            // A window that closed a moment ago (the slot's own timer fires just after its end) still runs, if it can.
            guard var task = self.tasks[key], task.request.late == .skip, task.deadline < now,
                now - task.deadline > Self.skipGrace || !conditions.unmet(task.request.requires).isEmpty
            else { continue }
            slot.skipped.append(key)
            guard let interval = task.request.interval.map(RefreshTask.seconds), interval > 0 else {
                self.tasks[key] = nil
                continue
            }
            let periods = ((now - task.deadline) / interval).rounded(.up)
            task.due += max(1, periods) * interval
            self.tasks[key] = task
        }
        let waiting = self.tasks.filter { self.running[$0.key] == nil && conditions.unmet($0.value.request.requires).isEmpty }
        let slotTime = waiting.values.map(\.deadline).min()
        if let slotTime, slotTime <= now {
            for (key, task) in waiting.sorted(by: { $0.key < $1.key }) where task.due <= now {
                slot.runs.append(key)
                self.running[key] = Run(started: now, ends: now + RefreshTask.seconds(task.request.budget))
            }
        }
        let stillWaiting = self.tasks.filter { self.running[$0.key] == nil && conditions.unmet($0.value.request.requires).isEmpty }
        let times = stillWaiting.values.map { max($0.deadline, now) } + self.running.values.map(\.ends)
        slot.next = times.min()
        return slot
    }

    /// A run ended (the app said so, or its budget ran out). A done run makes a periodic refresh due a period after
    /// it started and ends a one-time one; a failed or expired run is tried again after a backoff. Returns the task as
    /// it stands, `nil` when it is gone.
    @discardableResult
    public mutating func finished(_ key: Key, _ outcome: RefreshOutcome, now: Double) -> RefreshTask? {
        guard let run = self.running.removeValue(forKey: key), var task = self.tasks[key] else { return self.tasks[key] }
        task.lastRun = run.started
        task.lastOutcome = outcome
        switch outcome {
        case .done:
            task.failures = 0
            guard let interval = task.request.interval.map(RefreshTask.seconds), interval > 0 else {
                self.tasks[key] = nil
                return nil
            }
            task.due = max(task.due, run.started) + interval
        case .failed, .expired:
            task.failures += 1
            task.due = now + RefreshTask.seconds(RefreshTask.backoff(after: task.failures))
        }
        self.tasks[key] = task
        return task
    }
}
