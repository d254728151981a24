import CoalesceCore
import CoalesceStore
import Logging
import NIOCore
import Synchronization

/// Background refreshes (App.ScheduleRefresh, CancelRefresh, ListRefreshes, RefreshDone): every app's
/// ``RefreshPlan`` under one lock, fed the wall clock and what the system says of each condition; what it decides is
/// carried out after the lock, in order: the store's writes (through one writer, so that they commit in the order
/// decided), each run's event and the app woken or launched for it (``AppManager/runRefresh(_:id:budget:)``), and the
/// timer for the next slot.
final class RefreshScheduler: Sendable {
    typealias Settings = RefreshSettings

    /// A write of one app's refreshes, and who waits for it.
    private struct Write: Sendable {
        var app: AppName
        var changed: [RefreshTask]
        var removed: [String]
        var finished: (@Sendable (StoreError?) -> Void)?
    }

    private struct State {
        var plan = RefreshPlan<AppName>()
        var conditions = SystemConditions()
        /// Whether the conditions were ever told (the first reading decides even when it finds nothing known).
        var heardConditions = false
        /// Whether a follower reads them: then nothing runs before its first reading.
        var awaitsConditions = false
        var timer: Scheduled<Void>?
        var armedFor: Double?
    }

    static let backgroundRefresh = EventKind(daemonKind: "lifecycle.backgroundRefresh")

    typealias Key = RefreshPlan<AppName>.Key

    private let apps: AppManager
    private let logger: Logger
    private let state: Mutex<State>
    private let writes: AsyncStream<Write>.Continuation

    /// Takes up the refreshes the store kept.
    init(apps: AppManager, logger: Logger) throws(StoreError) {
        self.apps = apps
        self.logger = logger
        var state = State()
        for (app, task) in try apps.store.refreshes() {
            guard let name = try? AppName(app) else { continue }
            state.plan.restore(task, of: name)
        }
        self.state = Mutex(state)
        let (stream, continuation) = AsyncStream.makeStream(of: Write.self)
        self.writes = continuation
        let store = apps.store
        let logger = logger
        Task {
            for await write in stream {
                do throws(StoreError) {
                    try await store.writeRefreshes(of: write.app, changed: write.changed, removed: write.removed).wait()
                    write.finished?(nil)
                } catch {
                    if let finished = write.finished {
                        finished(error)
                    } else {
                        logger.warning("A refresh of \(write.app) was not kept: \(error)", metadata: ["app": "\(write.app)"])
                    }
                }
            }
        }
    }

    /// `[Refresh]` as the configuration in force says (a reload changes it for the next request).
    var currentSettings: Settings { self.apps.daemon.configuration.refresh }

    func stop() {
        self.writes.finish()
        self.state.withLock { $0.timer?.cancel() }
    }

    // MARK: What apps ask

    /// Schedules a refresh for the app (`keep`: an existing one of that id stays); on disk before it returns.
    func schedule(app name: String, uid: UInt32, request: RefreshRequest, keep: Bool) async throws(AppError) -> RefreshStatus {
        let app = try self.apps.actingFor(name, uid: uid)
        let settings = self.currentSettings
        if request.budget > settings.maxBudget {
            throw AppError.invalidRefresh(
                app: name, id: request.id, reason: "budgetSec is more than [Refresh] MaxBudgetSec= (\(settings.maxBudget.components.seconds) s) allows"
            )
        }
        if let interval = request.interval, interval < settings.minInterval {
            throw AppError.invalidRefresh(
                app: name, id: request.id,
                reason: "intervalSec is less than [Refresh] MinIntervalSec= (\(settings.minInterval.components.seconds) s) allows"
            )
        }
        let decided = try await self.decideAndWrite { state throws(AppError) -> ((RefreshTask, Bool), Write?) in
            let count = state.plan.refreshes(of: app).count
            if state.plan.tasks[Key(app: app, id: request.id)] == nil, count >= settings.maxPerApp {
                throw AppError.tooManyRefreshes(app: name, limit: settings.maxPerApp)
            }
            let scheduled = state.plan.schedule(request, for: app, keeping: keep ? .keep : .replace)
            guard scheduled.new else { return ((scheduled.task, false), nil) }
            return ((scheduled.task, true), Write(app: app, changed: [scheduled.task], removed: []))
        }
        if decided.1 {
            // A run of the one it replaces, if any, ends with it.
            self.apps.refreshEnded(app, id: request.id)
            self.logger.info("\(app): refresh \(request.id) scheduled", metadata: ["app": "\(app)", "refresh": "\(request.id)"])
        }
        self.reconsider()
        return self.status(of: decided.0, app: app)
    }

    func cancel(app name: String, uid: UInt32, id: String) async throws(AppError) {
        let app = try self.apps.actingFor(name, uid: uid)
        try await self.decideAndWrite { state throws(AppError) -> (Void, Write?) in
            guard state.plan.cancel(id, of: app) else { throw AppError.noSuchRefresh(app: name, id: id) }
            return ((), Write(app: app, changed: [], removed: [id]))
        }
        self.apps.refreshEnded(app, id: id)
        self.reconsider()
    }

    func list(app name: String, uid: UInt32) throws(AppError) -> [RefreshStatus] {
        let app = try self.apps.actingFor(name, uid: uid)
        return self.statuses(of: app)
    }

    /// The app says how a run went: a done one is due again a period later (or ends), a failed one after a backoff.
    func done(app name: String, uid: UInt32, id: String, success: Bool) async throws(AppError) {
        let app = try self.apps.actingFor(name, uid: uid)
        let now = self.apps.wall()
        let key = Key(app: app, id: id)
        try await self.decideAndWrite { state throws(AppError) -> (Void, Write?) in
            guard state.plan.running[key] != nil else {
                throw state.plan.tasks[key] == nil ? .noSuchRefresh(app: name, id: id) : .refreshNotRunning(app: name, id: id)
            }
            let remaining = state.plan.finished(key, success ? .done : .failed, now: now)
            return ((), Write(app: app, changed: remaining.map { [$0] } ?? [], removed: remaining == nil ? [id] : []))
        }
        self.apps.refreshEnded(app, id: id)
        self.logger.info(
            "\(app): refresh \(id) \(success ? "done" : "failed")", metadata: ["app": "\(app)", "refresh": "\(id)"]
        )
        self.reconsider()
    }

    // MARK: The system

    /// A follower reads the conditions: nothing runs before its first reading, so that a refresh that requires the
    /// network does not run at start before the daemon knows whether there is one.
    func awaitConditions() {
        self.state.withLock { $0.awaitsConditions = true }
    }

    /// What the system says of the conditions changed (or was read for the first time).
    func conditionsChanged(_ conditions: SystemConditions) {
        let changed = self.state.withLock { state in
            defer {
                state.conditions = conditions
                state.heardConditions = true
            }
            return !state.heardConditions || state.conditions != conditions
        }
        if changed { self.reconsider() }
    }

    var conditions: SystemConditions { self.state.withLock { $0.conditions } }

    /// Decides what runs now, and carries it out: each run's event and wake, the writes, the timer for the next
    /// slot.
    func reconsider() {
        let now = self.apps.wall()
        let slot = self.state.withLock { state -> RefreshPlan<AppName>.Slot? in
            guard state.heardConditions || !state.awaitsConditions else { return nil }
            let slot = state.plan.due(now: now, conditions: state.conditions)
            var written: [AppName: ([RefreshTask], [String])] = [:]
            for key in slot.expired + slot.skipped {
                if let task = state.plan.tasks[key] {
                    written[key.app, default: ([], [])].0.append(task)
                } else {
                    written[key.app, default: ([], [])].1.append(key.id)
                }
            }
            for (app, write) in written.sorted(by: { $0.key < $1.key }) {
                self.writes.yield(Write(app: app, changed: write.0, removed: write.1, finished: nil))
            }
            self.arm(&state, for: slot.next, now: now)
            return slot
        }
        guard let slot else { return }
        for key in slot.expired {
            self.apps.refreshEnded(key.app, id: key.id)
            self.logger.notice(
                "\(key.app): refresh \(key.id) ran out of its budget before the app said it was done",
                metadata: ["app": "\(key.app)", "refresh": "\(key.id)"]
            )
        }
        for key in slot.skipped {
            self.logger.info("\(key.app): refresh \(key.id) skipped: its window passed", metadata: ["app": "\(key.app)", "refresh": "\(key.id)"])
        }
        for key in slot.runs {
            guard let task = self.state.withLock({ $0.plan.tasks[key] }) else { continue }
            self.logger.info("\(key.app): refresh \(key.id) runs", metadata: ["app": "\(key.app)", "refresh": "\(key.id)"])
            self.apps.runRefresh(key.app, id: key.id, budget: task.request.budget)
        }
    }

    /// Arms the timer for `next` (seconds since the epoch), unless it is armed for that already.
    private func arm(_ state: inout State, for next: Double?, now: Double) {
        guard state.armedFor != next else { return }
        state.timer?.cancel()
        state.timer = nil
        state.armedFor = next
        guard let next else { return }
        // At most a day at a time: a later slot is looked at again then (and a date far off never overflows).
        let delay = min(max(0, next - now), 86_400)
        state.timer = self.apps.eventLoop.scheduleTask(in: .milliseconds(Int64((delay * 1000).rounded(.up)))) { [weak self] in
            guard let self else { return }
            self.state.withLock { $0.armedFor = nil }
            self.reconsider()
        }
    }

    /// Decides under the lock and hands the write the decision makes to the writer under the same lock, so that writes
    /// commit in the order they were decided; returns once it is on disk.
    private func decideAndWrite<T: Sendable>(
        _ body: (inout State) throws(AppError) -> (T, Write?)
    ) async throws(AppError) -> T {
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, AppError>, Never>) in
            do throws(AppError) {
                try self.state.withLock { state throws(AppError) in
                    let (value, write) = try body(&state)
                    guard var write else {
                        continuation.resume(returning: .success(value))
                        return
                    }
                    write.finished = { failure in
                        continuation.resume(returning: failure.map { .failure(.storageFailed(reason: $0.description)) } ?? .success(value))
                    }
                    if case .terminated = self.writes.yield(write) {
                        continuation.resume(returning: .failure(.storageFailed(reason: "the daemon is stopping")))
                    }
                }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try outcome.get()
    }

    // MARK: What it shows

    /// One refresh as ListRefreshes and Explain show it.
    struct RefreshStatus: Sendable, Hashable {
        var task: RefreshTask
        /// When its run's budget ends, while it runs.
        var runEnds: Double?
        /// Conditions it requires that do not hold now.
        var unmet: [RefreshCondition]
    }

    func statuses(of app: AppName) -> [RefreshStatus] {
        self.state.withLock { state in
            state.plan.refreshes(of: app).map { task in
                RefreshStatus(
                    task: task, runEnds: state.plan.running[Key(app: app, id: task.request.id)]?.ends,
                    unmet: state.conditions.unmet(task.request.requires)
                )
            }
        }
    }

    /// The app's refreshes as Explain tells them, at `wall`.
    func facts(of app: AppName, wall: Double) -> [AppExplanation.RefreshFact] {
        self.statuses(of: app).map { status in
            AppExplanation.RefreshFact(
                id: status.task.request.id,
                dueIn: .milliseconds(Int64((min(max(status.task.due - wall, -1e9), 1e9) * 1000).rounded())),
                flex: status.task.request.flex,
                failures: status.task.failures,
                unmet: status.unmet.map(\.rawValue),
                runLeft: status.runEnds.map { .milliseconds(Int64((max(0, $0 - wall) * 1000).rounded())) }
            )
        }
    }

    private func status(of task: RefreshTask, app: AppName) -> RefreshStatus {
        self.statuses(of: app).first { $0.task.request.id == task.request.id }
            ?? RefreshStatus(task: task, runEnds: nil, unmet: [])
    }
}
