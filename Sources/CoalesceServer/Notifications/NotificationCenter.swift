import CoalesceCore
import CoalesceStore
import Logging
import NIOCore
import Synchronization
import Varlink

/// Local notifications: the shell around the core's ``AlertScheduler``. Requests come in from
/// io.coalesced.Notifications, fires and clock changes from ``AlertTimer``; the scheduler decides; here its
/// actions are carried out: the store written (before the caller hears back, and before anything is presented),
/// each presentation put in the app's delivered list and presented (``NotificationCenter+Presenting``), the timers
/// armed.
///
/// One `Mutex` owns the scheduler, the delivered lists, badges and agents, and guards memory only: under it the core
/// is fed and decides, and what it decided (the store's writes, the timers, agents' replies) is carried out once it
/// is let go, in the order decided (``decide(_:)``, ``NotificationAction``). Waiting for a write and presenting
/// happen after that. Lock order: the manager's lock may be taken under this one (quota charges and owner look-ups
/// go with the decision), never the reverse.
final class NotificationCenter: Sendable {
    /// One entry of an app's delivered list: the presentation as io.coalesced.Notifications shows it.
    struct Delivered: Sendable {
        var serial: Int64
        var id: String
        var entry: JSONObject
        /// Its text's length, as the store keeps it: what it is charged against its owner's quota.
        var bytes: Int
        /// Where it stands with the desktop of its app's user (kept in the store as shown or not).
        var sight: Sight

        /// Where a delivered entry stands with the desktop of its app's user.
        enum Sight: Sendable {
            /// On its way to disk or being presented: the agents connected when it is presented get it then.
            case presenting
            /// Presented, and no agent of its user was sent it: the next one to connect is.
            case unseen
            /// Nothing more is owed: an agent of its user was sent it, it went to the active app alone, or it was
            /// answered.
            case shown
        }
    }

    /// What the center keeps per app besides its requests.
    struct AppAlerts: Sendable {
        var delivered: [Delivered] = []
        /// 0: no badge.
        var badge = 0
        var nextSerial: Int64 = 1
        /// Entries that went out of the list for room since it was last emptied.
        var dropped: Int64 = 0

        func row(_ app: AppName) -> Store.AlertAppRow {
            Store.AlertAppRow(app: app.value, badge: self.badge, nextSerial: self.nextSerial, dropped: self.dropped)
        }
    }

    /// A presentation agent's stream.
    struct Agent {
        var responder: VarlinkResponder
        var uid: UInt32
        var admin: Bool
        var continuation: CheckedContinuation<Void, Never>?
    }

    struct State {
        var scheduler: AlertScheduler
        var apps: [AppName: AppAlerts] = [:]
        var agents: [Int: Agent] = [:]
        var nextAgent = 1
        /// The alerts shown over the app on screen, which interrupt it until each is answered.
        var interruptions = AlertInterruptions()
        /// Each pending request's record length, as the store keeps it: what it is charged against its owner's quota.
        var requestBytes: [AlertKey: Int] = [:]
        /// The presentation rate, and what it holds (``NotificationCenter+Rate``).
        var rate = RateState()
        /// Delivered notifications whose answer is on its way to the app: answered already, for another Respond.
        var answering: Set<AlertKey> = []
        /// Writes decided since start: a reload from the store applies what it read only if none came meanwhile.
        var writes = 0
        /// What was decided and is yet to be carried out.
        var outbox = Outbox<NotificationAction>()
    }

    /// What one input to the center comes to, carried out once the lock is released.
    struct Step: Sendable {
        var change = Store.AlertChange()
        var touched: Set<AppName> = []
        var presentations: [(AlertPresentation, JSONObject)] = []
        var drops: [AlertDrop] = []
        var arm: (wall: WallTime?, boot: BootTime?)?
        /// What each app's notifications take more (or less) in memory after the step, for the quotas.
        var charges: [AppName: Int] = [:]
        /// Apps whose last alert went without an answer: their interruption ends.
        var endsInterruption: Set<AppName> = []
        /// What the journal says of the presentation rate: users that passed it, and stretches over it that ended.
        var rateNotices: [RateNotice] = []
        /// A request's dates now follow the machine's zone: the zone link is to be watched.
        var watchesZone = false
    }

    let store: Store
    let apps: AppManager
    let daemon: DaemonState
    let zones: ZoneDatabase
    let logger: Logger
    let state: Mutex<State>
    let commands: CommandSink
    let timer = Mutex<AlertTimer?>(nil)
    /// The presentation rate's timer; touched only while carrying actions out.
    let rateTimer = Mutex<Scheduled<Void>?>(nil)
    /// Told of each clock setting and zone change the timer reports, for the apps (``ClockZoneLocaleFollower``); and whether
    /// the zone link is watched from the start rather than once a floating rule needs it.
    let changes = Mutex<(follower: (@Sendable (AlertTimer.Event, String) -> Void)?, watchZone: Bool)>((nil, false))

    /// Reads what the store keeps; nothing fires before ``start()``.
    /// - Throws: ``StoreError`` when the store cannot be read.
    init(store: Store, apps: AppManager, daemon: DaemonState, zones: ZoneDatabase = ZoneDatabase(), logger: Logger) throws(StoreError) {
        self.store = store
        self.apps = apps
        self.daemon = daemon
        self.zones = zones
        self.logger = logger
        self.commands = CommandSink(logger: logger)
        let settings = daemon.configuration.notifications
        var state = State(
            scheduler: AlertScheduler(
                configuration: AlertConfiguration(pendingLimit: settings.pendingLimit, lateAfter: settings.lateAfter),
                localZone: zones.local()
            )
        )
        for row in try store.alertAppRows() {
            guard let app = try? AppName(row.app) else { continue }
            state.apps[app] = AppAlerts(badge: row.badge ?? 0, nextSerial: row.nextSerial, dropped: row.dropped)
        }
        var charges: [AppName: Int] = [:]
        for row in try store.alertDeliveredRows() {
            guard let app = try? AppName(row.app), let entry = (try? JSONParser.parse(row.entry))?.objectValue else { continue }
            state.apps[app, default: AppAlerts()].delivered.append(
                Delivered(
                    serial: row.serial, id: entry["id"]?.stringValue ?? "", entry: entry, bytes: row.entry.utf8.count,
                    sight: row.shown ? .shown : .unseen
                )
            )
            charges[app, default: 0] += row.entry.utf8.count
        }
        self.state = Mutex(state)
        apps.chargeNotifications(charges)
    }

    /// Takes up the requests the store kept (presenting, per their late policies, what came due while the daemon
    /// was down, and logging how many) and starts the timers.
    func start(localtimePath: String = "/etc/localtime") async throws {
        var records: [AlertRecord] = []
        let rows = try self.store.alertRequestRows()
        for row in rows {
            do {
                records.append(try NotificationWire.record(row.record, app: try AppName(row.app), zones: self.zones))
            } catch {
                // Left in the store as it is, not dropped: a zone database brought back makes it readable again.
                self.logger.error(
                    "A stored notification request cannot be read and is not scheduled: \(error)",
                    metadata: ["app": "\(row.app)", "notification": "\(row.id)"]
                )
            }
        }
        _ = try? await self.perform(reason: .start) { state, now, step in
            // What the store holds is charged first; the start's own changes then charge their differences.
            for row in rows {
                guard let app = try? AppName(row.app) else { continue }
                state.requestBytes[AlertKey(app: app, id: row.id)] = row.record.utf8.count
                step.charges[app, default: 0] += row.record.utf8.count
            }
            self.apply(state.scheduler.started(restoring: records, now: now), to: &state, &step)
        }
        // The zone link is watched once a floating calendar rule depends on it (``followsZone(_:)``).
        let timer = try AlertTimer(localtimePath: localtimePath, watchingZone: false) { [weak self] event in
            self?.timerEvent(event)
        }
        self.timer.withLock { $0 = timer }
        if self.changes.withLock({ $0.watchZone }), let problem = timer.watchZone() {
            self.logger.warning("Time zone changes are not watched (\(problem.failure)): apps are not told of them")
        }
        if records.contains(where: { Self.followsZone($0.request) }) { self.watchZone() }
        timer.arm(wall: self.state.withLock { $0.scheduler.timers.wall }, boot: self.state.withLock { $0.scheduler.timers.boot })
    }

    /// Has `follower` told of every clock setting and zone change (with the new zone's name) from ``start()`` on,
    /// and, `watchZone`, the zone link watched from the start.
    func followChanges(watchZone: Bool, _ follower: @escaping @Sendable (AlertTimer.Event, String) -> Void) {
        self.changes.withLock { $0 = (follower, watchZone) }
    }

    /// Whether a request's dates depend on the machine's zone: a calendar rule in floating local time. The zone link
    /// is watched once one does; without such a rule no daemon holds an inotify instance for it.
    static func followsZone(_ request: AlertRequest) -> Bool {
        if case .calendar(_, .floating, _) = request.trigger { true } else { false }
    }

    /// Has the timer watch the machine's zone link.
    func watchZone() {
        guard let timer = self.timer.withLock({ $0 }) else { return }
        if let problem = timer.watchZone() {
            self.logger.warning(
                "Time zone changes are not watched (\(problem.failure)); floating notification dates follow a new zone from the next start"
            )
        }
    }

    /// Stops the timers; requests stay in the store for the next start.
    func stop() {
        let timer = self.timer.withLock { timer -> AlertTimer? in
            defer { timer = nil }
            return timer
        }
        timer?.stop()
        self.stopRate()
        let agents = self.state.withLock { state -> [Agent] in
            defer { state.agents = [:] }
            return Array(state.agents.values)
        }
        for agent in agents {
            agent.responder.finish()
            agent.continuation?.resume()
        }
    }

    /// Why the scheduler is fed, for what the journal says of fires missed.
    enum Reason: String {
        case start = "while the daemon was down"
        case clockChange = "because the clock was set past them"
        case timeZoneChange = "because the time zone changed"
        case fire = "late"
        case request = "at the request"
    }

    /// Called on the timer's thread: the input is fed there, and what it presents is carried out off it.
    func timerEvent(_ event: AlertTimer.Event) {
        switch event {
        case .expired:
            self.perform(reason: .fire, { state, now, step in
                self.apply(state.scheduler.fired(now: now), to: &state, &step)
            }, completion: { _ in })
        case .clockChanged:
            self.logger.info("The wall clock was set: notification dates worked out again")
            self.perform(reason: .clockChange, { state, now, step in
                self.apply(state.scheduler.clockChanged(now: now), to: &state, &step)
            }, completion: { _ in })
            self.changes.withLock { $0.follower }?(event, "")
        case .timeZoneChanged:
            let zone = self.zones.local()
            self.logger.info("The time zone changed: floating notification dates worked out again", metadata: ["zone": "\(zone.name)"])
            self.perform(reason: .timeZoneChange, { state, now, step in
                self.apply(state.scheduler.timeZoneChanged(to: zone, now: now), to: &state, &step)
            }, completion: { _ in })
            self.changes.withLock { $0.follower }?(event, zone.name)
        }
    }

    /// The machine woke from sleep: what came due meanwhile is handled by its late policy.
    func resumed() async {
        _ = try? await self.perform(reason: .fire) { state, now, step in
            self.apply(state.scheduler.resumed(now: now), to: &state, &step)
        }
    }

    /// Feeds one input under the lock; once the lock is let go its store write is submitted and the timers armed, in
    /// the order decided; once the write is on disk carries out the presentations and calls `completion`, without a
    /// task (deferred Varlink methods answer from it). Presentations are carried out off the store's thread.
    /// - Parameter completion: the value, or what `body` threw (nothing changed then), or
    ///   ``NotificationError/storageFailed(reason:)`` when the store refused the write: then what the center holds
    ///   is read back from the store.
    func perform<T: Sendable>(
        reason: Reason = .request,
        _ body: (inout State, ClockReading, inout Step) throws(NotificationError) -> T,
        completion: @escaping @Sendable (Result<T, NotificationError>) -> Void
    ) {
        let now = AlertTimer.now()
        var step = Step()
        // Set once the step is decided: the write's answer, which may come at once, needs the whole step.
        let decided = Mutex<(Step, T)?>(nil)
        let finish: @Sendable (Result<Void, StoreError>) -> Void = { outcome in
            guard let (done, value) = decided.withLock({ $0 }) else { return }
            if case .failure(let error) = outcome {
                self.apps.writes.report("notifications", error)
                self.reloadFromStore()
                return completion(.failure(.storageFailed(reason: error.description)))
            }
            self.apps.writes.report("notifications", nil)
            for app in done.endsInterruption { _ = try? self.apps.interrupt(name: app.value, begins: false, cause: .alert) }
            self.logRate(done.rateNotices)
            guard !done.presentations.isEmpty || !done.drops.isEmpty else { return completion(.success(value)) }
            Task {
                self.carryOut(done, reason: reason)
                completion(.success(value))
            }
        }
        let writes: Bool
        do {
            writes = try self.decide { state throws(NotificationError) -> Bool in
                let settings = self.daemon.configuration.notifications
                state.scheduler.configuration.pendingLimit = settings.pendingLimit
                state.scheduler.configuration.lateAfter = settings.lateAfter
                let value = try body(&state, now, &step)
                for app in step.touched { step.change.apps.append(state.apps[app, default: AppAlerts()].row(app)) }
                decided.withLock { $0 = (step, value) }
                // With the decision, so that the ledger follows the changes in the order they were made.
                self.apps.chargeNotifications(step.charges)
                if let arm = step.arm { state.outbox.add(.arm(wall: arm.wall, boot: arm.boot)) }
                if step.watchesZone { state.outbox.add(.watchZone) }
                guard !step.change.isEmpty else { return false }
                self.queueWrite(step.change, in: &state, finished: finish)
                return true
            }
        } catch {
            return completion(.failure(error))
        }
        if !writes { finish(.success(())) }
    }

    /// Queues a write of `change`, counted for a reload from the store.
    func queueWrite(_ change: Store.AlertChange, in state: inout State, finished: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        state.writes += 1
        state.outbox.add(.write(change, finished: finished))
    }

    /// ``perform(reason:_:completion:)``, awaited.
    func perform<T: Sendable>(
        reason: Reason = .request,
        _ body: (inout State, ClockReading, inout Step) throws(NotificationError) -> T
    ) async throws(NotificationError) -> T {
        try await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, NotificationError>, Never>) in
            self.perform(reason: reason, body) { continuation.resume(returning: $0) }
        }.get()
    }

    /// Takes what the store holds as the truth again after a write it refused: the requests, the delivered lists
    /// and badges, what they are charged, and the timers. Read after the writes queued before it (a barrier write
    /// ordered after them) and without the lock; applied under the lock only if no write was decided meanwhile,
    /// else read again after that one, so that no change the store took is read back as missing.
    func reloadFromStore() {
        self.decide { state in
            let writes = state.writes + 1
            self.queueWrite(Store.AlertChange.barrier, in: &state) { _ in
                Task { self.reload(ifWritesAre: writes) }
            }
        }
    }

    private func reload(ifWritesAre writes: Int) {
        guard let rows = try? self.store.alertRequestRows(), let delivered = try? self.store.alertDeliveredRows(),
            let appRows = try? self.store.alertAppRows()
        else { return }
        let records = rows.compactMap { row in
            (try? AppName(row.app)).flatMap { try? NotificationWire.record(row.record, app: $0, zones: self.zones) }
        }
        let applied = self.decide { state -> Bool in
            guard state.writes == writes else { return false }
            var scheduler = AlertScheduler(configuration: state.scheduler.configuration, localZone: state.scheduler.localZone)
            // Only to restore: what is due is handled by the fire the timers are armed for below, at once.
            _ = scheduler.started(restoring: records, now: AlertTimer.now())
            state.scheduler = scheduler
            var charges: [AppName: Int] = [:]
            for (key, bytes) in state.requestBytes { charges[key.app, default: 0] -= bytes }
            for (app, alerts) in state.apps { charges[app, default: 0] -= alerts.delivered.reduce(0) { $0 + $1.bytes } }
            state.requestBytes = [:]
            for row in rows {
                guard let app = try? AppName(row.app) else { continue }
                state.requestBytes[AlertKey(app: app, id: row.id)] = row.record.utf8.count
                charges[app, default: 0] += row.record.utf8.count
            }
            // What the desktop was sent is known here first: the store hears of it a write later.
            var sights: [AppName: [Int64: Delivered.Sight]] = [:]
            for (app, alerts) in state.apps {
                for entry in alerts.delivered { sights[app, default: [:]][entry.serial] = entry.sight }
            }
            state.apps = [:]
            for row in appRows {
                guard let app = try? AppName(row.app) else { continue }
                state.apps[app] = AppAlerts(badge: row.badge ?? 0, nextSerial: row.nextSerial, dropped: row.dropped)
            }
            for row in delivered {
                guard let app = try? AppName(row.app), let entry = (try? JSONParser.parse(row.entry))?.objectValue else { continue }
                state.apps[app, default: AppAlerts()].delivered.append(
                    Delivered(
                        serial: row.serial, id: entry["id"]?.stringValue ?? "", entry: entry, bytes: row.entry.utf8.count,
                        sight: sights[app]?[row.serial] ?? (row.shown ? .shown : .unseen)
                    )
                )
                charges[app, default: 0] += row.entry.utf8.count
            }
            self.apps.chargeNotifications(charges)
            let timers = state.scheduler.timers
            state.outbox.add(.arm(wall: timers.wall, boot: timers.boot))
            return true
        }
        if !applied { self.reloadFromStore() }
    }

    /// Carries the scheduler's actions into the state and the step: records to write, presentations put in the
    /// delivered lists (oldest out past MaxDelivered=) with their badges, or held by the presentation rate
    /// (``admit(_:now:to:_:)``), drops, timers.
    func apply(_ actions: [AlertAction], to state: inout State, _ step: inout Step) {
        var now: BootTime?
        for action in actions {
            switch action {
            case .keep(let record):
                let text = NotificationWire.storeText(record)
                step.change.keep.append(Store.AlertRequestRow(app: record.key.app.value, id: record.key.id, record: text))
                let old = state.requestBytes.updateValue(text.utf8.count, forKey: record.key) ?? 0
                step.charges[record.key.app, default: 0] += text.utf8.count - old
            case .forget(let key):
                step.change.forget.append((key.app.value, key.id))
                step.charges[key.app, default: 0] -= state.requestBytes.removeValue(forKey: key) ?? 0
            case .present(let presentation):
                // Read once per input, and only for one that presents.
                now = now ?? AlertTimer.now().boot
                self.admit(presentation, now: now!, to: &state, &step)
            case .dropped(let drop):
                step.drops.append(drop)
            case .arm(let wall, let boot):
                step.arm = (wall, boot)
            }
        }
    }
}
