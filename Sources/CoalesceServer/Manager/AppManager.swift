import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// Every registered app: its durable registration, its lifecycle, its events, its attached stream and its timers.
///
/// This is the shell around the core's ``AppLifecycle`` and ``Inbox``: requests come in from the Varlink methods,
/// the clock and the store, the core decides, and the shell carries the decisions out. One `Mutex` owns the
/// manager's ``State`` and guards memory only: under it the core is fed and decides, and what it decided (stream
/// replies, store writes, signals, unit calls, timers, journal entries, answers to waiting calls) is carried out
/// once the lock is let go, in the order decided (``decide(_:)``, ``AppAction``, `+Outbox`).
///
/// One file per concern: deciding and carrying out (`+Outbox`), the registry (`+Registry`), the app side
/// (`+AppSide`), launch and process control (`+SystemSide`), the lifecycle's effects (`+Lifecycle`), events
/// (`+Events`, `+Writes`), monitors and parked streams (`+Monitors`), suspension (`+Suspension`), restart recovery
/// (`+Recovery`).
final class AppManager: Sendable {
    /// The lifecycle's time: CLOCK_MONOTONIC, which stands still while the machine sleeps, as the event loop's
    /// timers do. So a sleep neither kills an app for an acknowledgement it could not send nor uses up its
    /// background time, and the timers need no re-arming on wake.
    typealias Instant = SuspendingClock.Instant

    /// One app as both interfaces report it.
    struct Snapshot: Sendable, Hashable {
        var registration: AppRegistration
        var state: AppState
        var pid: Int32?
        /// Whether the app's process has a stream attached.
        var attached: Bool
        var tasks: Int
        /// When the app entered its state, seconds since the Unix epoch.
        var since: Double
        /// How its process is held while it is suspended, if it is.
        var hold: ProcessHold? = nil
        /// Its connected scenes, by id.
        var scenes: [Scene] = []
    }

    /// How a parked stream (an Attach or a Monitor) ended.
    enum StreamEnd: Sendable {
        /// Its client hung up.
        case closed
        /// The daemon ended it with a final reply already sent.
        case finished
        /// Another Attach took over.
        case replaced
        /// A monitor that did not read.
        case overrun
    }

    /// A parked stream's task, waiting for its end.
    struct Park {
        var continuation: CheckedContinuation<StreamEnd, Never>?
        var end: StreamEnd?
    }

    /// The registry of apps (their records and the indices over them) and the owners of the rest
    /// (`AppManagerOwners.swift`), under the one lock.
    struct State {
        var records: [AppName: Record] = [:]
        var monitoring = MonitorBoard()
        var parks = Parks()
        var nextID = 1
        var transitions = 0
        /// Apps in the foreground (inactive or active): an index, so that finding them does not visit every app.
        var onScreen: Set<AppName> = []
        /// Which app each attached stream belongs to.
        var attached: [Int: AppName] = [:]
        /// The apps subscribed to each topic: an index, so that a post to a topic does not visit every app.
        var subscribers: [EventKind: Set<AppName>] = [:]
        /// The apps that declared each window app id besides their names (Register's `windowIds`): an index, so that
        /// matching a reported window does not visit every app.
        var windowApps: [String: Set<AppName>] = [:]
        /// Apps per state, kept as transitions happen (STATUS= asks every second).
        var counts: [AppState: Int] = [:]
        /// Posts accepted since start: sent at once, and held.
        var postsSent = 0
        var postsHeld = 0
        /// Apps with posts waiting for their inbox's next write, in the order they came; and whether the flush that
        /// makes those writes is scheduled.
        var unflushed: [AppName] = []
        var flushScheduled = false
        /// What inboxes decided in this decision, counted and queued at its end (``AppManager/decide(_:)``).
        var inboxActions: [(AppName, [AppManager.InboxAction])] = []
        /// Processes this decision kills: not continued first (``AppManager/settleSuspension(_:_:killed:log:)``).
        var kills: [any AppProcess] = []
        /// What was decided and is yet to be carried out, in order, by one thread at a time.
        var outbox = Outbox<AppAction>()
        /// What this decision's own thread carries out once it lets go: what needs no order across threads.
        var own: [AppAction] = []
        /// The daemon is stopping: a stream that closes from now on was closed by the daemon, not by its app's
        /// process ending (``AppManager/daemonStopping()``).
        var stopping = false
        /// What each user's apps take against the quotas.
        var ledger = QuotaLedger(quotas: Quotas())
        var acknowledgementWaiters = AcknowledgementWaiters()
        var screenLock = ScreenLockBook()
        var windows = WindowBook()

        /// Counts a post the inbox answered: sent at once, or held.
        mutating func count(_ answer: AppManager.AppInbox.Answer) {
            switch answer {
            case .sent: self.postsSent += 1
            case .held: self.postsHeld += 1
            case .refused, .storeFailed: break
            }
        }

        /// Runs `body` on one app's record where it lies in the dictionary (reading `records[app]` copies the whole
        /// record, on the hot paths of posting); `nil` when there is no such app.
        mutating func update<T, Failure: Error>(_ app: AppName, _ body: (inout Record) throws(Failure) -> T) throws(Failure) -> T? {
            guard let index = self.records.index(forKey: app) else { return nil }
            return try body(&self.records.values[index])
        }

        /// ``update(_:_:)`` for a body that also queues actions.
        mutating func deciding<T>(_ app: AppName, _ body: (inout Record, inout Outbox<AppAction>) -> T) -> T? {
            guard let index = self.records.index(forKey: app) else { return nil }
            return body(&self.records.values[index], &self.outbox)
        }
    }

    /// What to write to the journal once the lock is released.
    struct LogEntry {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    /// A monitor's unread replies may hold this much before it is ended.
    static let monitorBacklogBound = 1 << 20
    /// Events sent to an app and not acknowledged, past which its posts are held until it catches up.
    static let maximumUnacknowledged = 4096

    let store: Store
    let daemon: DaemonState
    let eventLoop: any EventLoop
    let logger: Logger
    let startUnit: @Sendable (String) async throws -> Void
    /// FreezeUnit and ThawUnit of apps' launch units (`+Suspension`); they block.
    let unitControl: UnitControl
    let state: Mutex<State>
    /// The timers armed, by name; touched only while carrying actions out (``arm(_:after:)``).
    let timers = Mutex<[AppTimer: Scheduled<Void>]>([:])
    /// What the store has set aside, per app: what a start could not read back (``setAside(_:)``).
    let setAsideData: Mutex<[Store.SetAsideSummary]>
    /// The first sequence number of this generation of the daemon.
    let firstSequence: UInt64
    /// The first number of the first run's generation (1): generation << 32 + 1.
    static let earliestSequence: UInt64 = 1 << 32 + 1

    /// The lifecycle's clock. Its timers run on ``eventLoop``: a test gives both manual time (an
    /// `NIOAsyncTestingEventLoop`, and a clock that reads the loop's time).
    let now: @Sendable () -> Instant
    /// The wall clock, seconds since the Unix epoch: when an app entered its state, when an event was posted, what
    /// monitors are told. The real one unless a test sets it.
    let wall: @Sendable () -> Double
    /// The error a post failed with its write hears when the store gave none.
    let writeRefused: StoreError
    /// What every writer does with the store's refusals (``WriteRefusal``); the notification center reports here too.
    let writes: StoreWrites

    /// Loads the registered apps, what they hold and what they have not acknowledged, from the store.
    /// - Parameters:
    ///   - startUnit: starts a launch unit through systemd.
    ///   - unitControl: freezes and thaws launch units through systemd; its calls block.
    ///   - now: the lifecycle's clock; the real one unless a test moves time by hand.
    ///   - wall: the wall clock, seconds since the Unix epoch; the real one unless a test sets it.
    ///   - processes: opens the processes a restart takes up by their recorded pids; by pidfd unless a test has
    ///     fake ones.
    init(
        store: Store,
        daemon: DaemonState,
        eventLoop: any EventLoop,
        logger: Logger,
        startUnit: @escaping @Sendable (String) async throws -> Void,
        unitControl: UnitControl = .unavailable,
        now: @escaping @Sendable () -> Instant = { .now },
        wall: @escaping @Sendable () -> Double = wallClock,
        processes: ProcessOpener = .pidfd
    ) throws(StoreError) {
        self.store = store
        self.daemon = daemon
        self.eventLoop = eventLoop
        self.logger = logger
        self.startUnit = startUnit
        self.unitControl = unitControl
        self.now = now
        self.wall = wall
        self.writeRefused = .cannotWrite(path: store.path, reason: "the write was refused")
        // A start on a full disk has said so (once): the first refused write is not news.
        self.writes = StoreWrites(failing: !store.isWritable, logger: logger)
        var state = State()
        state.ledger = QuotaLedger(quotas: daemon.configuration.quotas)
        let timings = daemon.configuration.timings
        let now = wall()
        // Sequence numbers never go backwards across restarts: each start is a generation, numbered in the high bits.
        self.firstSequence = UInt64(store.generation) << 32 + 1
        // A row that cannot be read sets aside what its app holds (`setAside`): starting without it silently would
        // lose it, and refusing to start would stop every other app's service over one app's data.
        var unreadable: [String: (reason: String, declarations: Bool)] = [:]
        func cannotRead(_ app: String, _ what: String, declarations: Bool = false) {
            if unreadable[app] == nil { unreadable[app] = (what, declarations) }
            if declarations { unreadable[app]!.declarations = true }
        }
        for (registration, declarations) in try store.apps() {
            var record = Record(
                registration: registration,
                lifecycle: AppLifecycle(
                    traits: registration.traits, timings: timings, firstSequence: self.firstSequence,
                    earliestSequence: Self.earliestSequence
                ),
                since: now,
                inbox: AppInbox(kindLimit: daemon.configuration.maxKindsPerApp),
                account: state.ledger.account(of: registration.owner)
            )
            if let stored = EventDeclarations(stored: declarations) {
                record.declarations = stored
            } else {
                cannotRead(registration.name.value, "its event declarations cannot be read", declarations: true)
            }
            state.records[registration.name] = record
            for topic in record.declarations.topics { state.subscribers[topic, default: []].insert(registration.name) }
            for id in registration.windowIDs { state.windowApps[id, default: []].insert(registration.name) }
        }
        try store.eachHeldRow { row in
            guard let app = try? AppName(row.app), let kind = try? EventKind(stored: row.kind),
                let slot = EventCoding.decodeSlot(row.slot)
            else { return cannotRead(row.app, "what it holds of \(row.kind) cannot be read") }
            state.records[app]?.inbox.restore(kind, slot)
        }
        try store.eachQueuedRow { row in
            guard let app = try? AppName(row.app), let kind = try? EventKind(stored: row.kind),
                let payload = try? JSONParser.parse(row.payload)
            else { return cannotRead(row.app, "entry \(row.serial) of its \(row.kind) cannot be read") }
            state.records[app]?.inbox.restore(kind, .init(payload: EventPayload(payload), posted: row.posted, serial: row.serial))
        }
        try store.eachDeliveryRow { row in
            guard let app = try? AppName(row.app), let event = EventCoding.decodeEvent(row.event)
            else { return cannotRead(row.app, "event \(row.id) sent to it cannot be read") }
            state.records[app]?.inbox.restore(AppInbox.Stored(id: row.id, event: event))
        }
        for row in try store.baselineRows() {
            guard let app = try? AppName(row.app), let kind = try? EventKind(stored: row.kind),
                let payload = try? JSONParser.parse(row.payload)
            else {
                cannotRead(row.app, "what it last received of \(row.kind) cannot be read")
                continue
            }
            state.records[app]?.inbox.restoreBaseline(kind, EventPayload(payload))
        }
        for row in try store.sceneStates() {
            guard let app = try? AppName(row.app), let scene = try? SceneID(row.scene) else { continue }
            state.records[app]?.scenes.save(scene, state: row.data)
        }
        for app in unreadable.keys {
            if let name = try? AppName(app) { state.records[name]?.inbox = AppInbox(kindLimit: daemon.configuration.maxKindsPerApp) }
        }
        let restoring = try Self.restoreStates(
            store.runningStates(), into: &state, store: store, opener: processes, logger: logger
        )
        Self.account(&state, adminGroup: daemon.configuration.adminGroup)
        self.state = Mutex(state)
        self.setAsideData = Mutex(try store.setAsideSummaries())
        // Submitted before any write of held data, so that none of the app's can land on a row set aside.
        self.setAside(unreadable.sorted { $0.key < $1.key }.map { ($0.key, $0.value.reason, $0.value.declarations) })
        // With LaunchTimeoutSec=infinity an app that outlived the daemon may take as long as it needs to attach. One
        // whose process is held cannot attach: its time starts when it is continued (`+Suspension`).
        for appName in restoring {
            guard let timeout = daemon.configuration.launchTimeout else { break }
            let held = self.state.withLock { state in
                state.update(appName) { record in
                    if record.suspension.held == nil { record.restored?.timeoutArmed = true }
                    return record.suspension.held != nil
                }
            }
            if held == false { self.arm(.reattach(appName), after: timeout, from: eventLoop.now) }
        }
        self.thawLeftOver()
    }

    var count: Int { self.state.withLock { $0.records.count } }

    /// What the store keeps set aside, per app.
    var setAside: [Store.SetAsideSummary] { self.setAsideData.withLock { $0 } }

    /// Apps per state, and transitions since start.
    var statistics: (states: [AppState: Int], transitions: Int) {
        self.state.withLock { ($0.counts.filter { $0.value > 0 }, $0.transitions) }
    }

    /// Posts since start, sent at once and held; kinds held and events unacknowledged now, over every app.
    var eventStatistics: (sent: Int, held: Int, kindsHeld: Int, unacknowledged: Int) {
        self.state.withLock { state in
            var kinds = 0
            var unacknowledged = 0
            for name in state.records.keys {
                kinds += state.records[name]!.inbox.held.kinds.count
                unacknowledged += state.records[name]!.inbox.outstanding
            }
            return (state.postsSent, state.postsHeld, kinds, unacknowledged)
        }
    }

    /// Charges the ledger with the apps loaded at start-up and what their events take; owners in the admin group
    /// get the administrators' quotas (looked up here, before the daemon serves).
    private static func account(_ state: inout State, adminGroup: AdminGroup?) {
        let ledger = state.ledger
        var looked: Set<UInt32> = []  // one user-database lookup per owner, not per app
        for record in state.records.values {
            let account = record.account
            if let adminGroup, !account.admin, looked.insert(account.uid).inserted,
                QuotaLedger.isMember(account.uid, of: adminGroup)
            {
                account.admin = true
            }
            account.apps += 1
            ledger.charge(account, record.inbox.footprint)
        }
    }

    /// A reload changed the quotas: posts and registrations are held to the new ones from now on (what apps hold
    /// already stays, over a lowered quota too, and new posts are refused until it is under again).
    func quotasChanged(_ quotas: Quotas) {
        self.state.withLock { $0.ledger.quotas = quotas }
    }

    /// What the quotas count now: every app's events in all against the ceiling, and `uid`'s apps and events
    /// against its quotas.
    func quotaUsage(of uid: UInt32) -> (held: Int, ceiling: Quota, apps: Int, bytes: Int, userHeld: Quota, userApps: Quota) {
        self.state.withLock { state in
            let ledger = state.ledger
            let account = ledger.usage(of: uid)
            return (
                ledger.bytes, ledger.heldBytesCeiling, account.apps, account.bytes, ledger.heldBytesQuota(of: account),
                ledger.appsQuota(of: account)
            )
        }
    }

    /// A reload changed the lifecycle's time limits: every app runs by the new ones from now on.
    func timingsChanged(_ timings: LifecycleTimings) {
        self.state.withLock { state in
            for name in state.records.keys { state.records[name]!.lifecycle.timings = timings }
        }
    }

    // MARK: Lookups

    static func appName(_ name: String) throws(AppError) -> AppName {
        do { return try AppName(name) } catch { throw AppError(error) }
    }

    /// For the System side, which names apps that exist: a name that cannot be one is no such app.
    static func systemAppName(_ name: String) throws(SystemError) -> AppName {
        guard let appName = try? AppName(name) else { throw .noSuchApp(app: name) }
        return appName
    }

    /// The record of an app the caller may act for, for the App side.
    func appRecord(_ appName: AppName, uid: UInt32, in state: State) throws(AppError) -> Record {
        guard let record = state.records[appName] else { throw .notRegistered(app: appName.value) }
        guard record.registration.mayBeActedFor(by: uid) else { throw .notOwner(app: appName.value) }
        return record
    }

    /// The app a System call names, or the one `matches` picks when it names none.
    func target(_ name: String?, in state: State, matches: (Record) -> Bool) throws(SystemError) -> AppName {
        if let name {
            let appName = try Self.systemAppName(name)
            guard state.records[appName] != nil else { throw .noSuchApp(app: name) }
            return appName
        }
        guard let found = state.onScreen.sorted().first(where: { matches(state.records[$0]!) }) else {
            throw .noForegroundApp
        }
        return found
    }
}

/// Seconds since the Unix epoch.
func wallClock() -> Double {
    SystemClock.realtime.now().totalSeconds
}

