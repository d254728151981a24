import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Every registered app: its durable registration, its lifecycle, its attached stream and its timers.
///
/// This is the shell around ``AppLifecycle``: requests come in from the Varlink methods and the clock, the core
/// says what happens, and the effects are carried out here, in order, under one lock, so that each app's stream
/// receives its callbacks in the order the core produced them and monitors see transitions in the same order.
/// Journal entries are written after the lock is released.
final class AppManager: Sendable {
    typealias Instant = ContinuousClock.Instant

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

    struct Attachment {
        var id: Int
        var responder: VarlinkResponder
        var process: ProcessHandle?
        var pid: Int32
        /// What tells the process from a later one with its pid (``ProcessHandle/identity``), recorded with the state.
        var identity: String?
    }

    /// The process of an app whose state was taken up from the store at start-up: it outlived the daemon's last run
    /// and has not attached again yet.
    struct RestoredProcess {
        var process: ProcessHandle
        var identity: String
        /// When it no longer counts as the app unless it attached.
        var timeout: Scheduled<Void>?
        /// Callbacks of what happened to the app meanwhile (a System request), in order: sent when it attaches.
        var unsent: [JSONObject] = []
    }

    /// What a launch hands the app with didFinishLaunching.
    private struct LaunchContext {
        var destination: LaunchDestination
        var restoredState: String?
    }

    struct PendingLaunch {
        var destination: LaunchDestination
        var waiters: [CheckedContinuation<Void, any Error>] = []
        var timeout: Scheduled<Void>?
    }

    struct Record {
        var registration: AppRegistration
        var lifecycle: AppLifecycle<Instant>
        var attachment: Attachment?
        var pendingLaunch: PendingLaunch?
        var deadline: Scheduled<Void>?
        var since: Double
        /// The willTerminate an ended process may still acknowledge, so that it is signalled at once.
        var termination: Termination?
        /// Running by the state recorded before a restart of the daemon, waiting for its process to attach again.
        var restored: RestoredProcess?

        /// The process that runs the app: the attached one, or the one taken up after a restart that has not
        /// attached again.
        var process: (handle: ProcessHandle?, pid: Int32, identity: String?)? {
            if let attachment { return (attachment.process, attachment.pid, attachment.identity) }
            if let restored { return (restored.process, restored.process.pid, restored.identity) }
            return nil
        }
        /// Policies per kind and who may post.
        var declarations = EventDeclarations()
        /// Its events: held, sent and not acknowledged, stored and not sent, and its write with the store.
        var inbox: AppInbox
        /// A refused delivery of what the app held was logged; its success is logged when it comes.
        var deliveryRefused = false
        /// The app is among those whose inbox makes its write at the end of the event loop's pass.
        var flushQueued = false
    }

    /// A parked stream's task, waiting for its end.
    struct Park {
        var continuation: CheckedContinuation<StreamEnd, Never>?
        var end: StreamEnd?
    }

    struct State {
        var records: [AppName: Record] = [:]
        var monitors: [Int: VarlinkResponder] = [:]
        var parks: [Int: Park] = [:]
        var nextID = 1
        var transitions = 0
        /// Apps in the foreground (inactive or active): an index, so that finding them does not visit every app.
        var onScreen: Set<AppName> = []
        /// Which app each attached stream belongs to.
        var attached: [Int: AppName] = [:]
        /// The apps subscribed to each topic: an index, so that a post to a topic does not visit every app.
        var subscribers: [EventKind: Set<AppName>] = [:]
        /// Apps per state, kept as transitions happen (STATUS= asks every second).
        var counts: [AppState: Int] = [:]
        /// Posts accepted since start: sent at once, and held.
        var postsSent = 0
        var postsHeld = 0
        /// The store refused the last event write: logged once, and once more when it keeps one again.
        var storeFailing = false
        /// Apps with posts waiting for their inbox's next write, in the order they came; and whether the flush that
        /// makes those writes is scheduled.
        var unflushed: [AppName] = []
        var flushScheduled = false
        /// What inboxes decided under the lock, carried out once it is released (``AppManager/locked(_:)``).
        var inboxActions: [(AppName, [AppManager.InboxAction])] = []

        /// Runs `body` on one app's record where it lies in the dictionary (reading `records[app]` copies the whole
        /// record, on the hot paths of posting); `nil` when there is no such app.
        mutating func update<T, Failure: Error>(_ app: AppName, _ body: (inout Record) throws(Failure) -> T) throws(Failure) -> T? {
            guard let index = self.records.index(forKey: app) else { return nil }
            return try body(&self.records.values[index])
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
    private let startUnit: @Sendable (String) throws -> Void
    let state: Mutex<State>
    /// The first sequence number of this generation of the daemon.
    private let firstSequence: UInt64

    /// Loads the registered apps, what they hold and what they have not acknowledged, from the store.
    /// - Parameter startUnit: starts a launch unit through systemd; it may block.
    init(
        store: Store,
        daemon: DaemonState,
        eventLoop: any EventLoop,
        logger: Logger,
        startUnit: @escaping @Sendable (String) throws -> Void
    ) throws(StoreError) {
        self.store = store
        self.daemon = daemon
        self.eventLoop = eventLoop
        self.logger = logger
        self.startUnit = startUnit
        var state = State()
        let timings = daemon.configuration.timings
        let now = wallClock()
        // Sequence numbers never go backwards across restarts: each start is a generation, numbered in the high bits.
        self.firstSequence = UInt64(try store.nextGeneration()) << 32 + 1
        for (registration, declarations) in try store.apps() {
            var record = Record(
                registration: registration,
                lifecycle: AppLifecycle(traits: registration.traits, timings: timings, firstSequence: self.firstSequence),
                since: now,
                inbox: AppInbox(kindLimit: daemon.configuration.maxKindsPerApp)
            )
            guard let stored = EventDeclarations(stored: declarations) else {
                throw .damaged(path: store.path, what: "the event declarations of \(registration.name) cannot be read")
            }
            record.declarations = stored
            state.records[registration.name] = record
            for topic in record.declarations.topics { state.subscribers[topic, default: []].insert(registration.name) }
        }
        // A row that cannot be read is a damaged store: starting without it would lose what it holds, silently.
        for row in try store.heldRows() {
            guard let app = try? AppName(row.app), let kind = try? EventKind(row.kind),
                let slot = EventCoding.decodeSlot(row.slot)
            else { throw .damaged(path: store.path, what: "what \(row.app) holds of \(row.kind) cannot be read") }
            state.records[app]?.inbox.restore(kind, slot)
        }
        for row in try store.deliveryRows() {
            guard let app = try? AppName(row.app), let event = EventCoding.decodeEvent(row.event)
            else { throw .damaged(path: store.path, what: "event \(row.id) sent to \(row.app) cannot be read") }
            state.records[app]?.inbox.restore(AppInbox.Stored(id: row.id, event: event))
        }
        for row in try store.baselineRows() {
            guard let app = try? AppName(row.app), let kind = try? EventKind(row.kind),
                let payload = try? JSONParser.parse(row.payload)
            else { throw .damaged(path: store.path, what: "what \(row.app) last received of \(row.kind) cannot be read") }
            state.records[app]?.inbox.restoreBaseline(kind, EventPayload(payload))
        }
        let restoring = try Self.restoreStates(store.runningStates(), into: &state, store: store, logger: logger)
        self.state = Mutex(state)
        for appName in restoring {
            let timeout = daemon.configuration.launchTimeout
            let scheduled = eventLoop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) { self.reattachTimedOut(appName, timeout: timeout) }
            self.state.withLock { $0.records[appName]?.restored?.timeout = scheduled }
        }
    }

    /// Takes up the states recorded for apps whose processes outlived the daemon's last run (the same process: its
    /// pid and start time in this boot), and records the others as not running; returns the apps taken up. Until
    /// its process attaches again, such an app holds what is posted to it, and its callbacks wait for a stream.
    private static func restoreStates(
        _ recorded: [AppName: Store.RecordedState],
        into state: inout State,
        store: Store,
        logger: Logger
    ) -> [AppName] {
        var restoring: [AppName] = []
        for (appName, last) in recorded.sorted(by: { $0.key < $1.key }) {
            guard state.records[appName] != nil else { continue }
            // The pidfd is opened first and the process checked through it, so that the pid cannot pass to another
            // process between the check and its use.
            let alive = last.pid.flatMap { try? ProcessHandle(pid: $0) }
            guard let alive, let identity = last.process, alive.identity == identity,
                let taken = state.records[appName]!.lifecycle.restore(last.state, interrupted: last.interrupted)
            else {
                store.record(Store.RecordedState(state: .notRunning), of: appName)
                let entry = Self.transitionEntry(app: appName, from: last.state, to: .notRunning, reason: .processExited, pid: last.pid)
                logger.log(level: entry.level, "\(entry.message), while the daemon was not running", metadata: entry.metadata)
                continue
            }
            state.records[appName]!.restored = RestoredProcess(process: alive, identity: identity)
            state.counts[taken, default: 0] += 1
            if taken.isForeground { state.onScreen.insert(appName) }
            if taken != last.state {
                store.record(Store.RecordedState(state: taken, pid: alive.pid, process: identity), of: appName)
            }
            restoring.append(appName)
            logger.info(
                "\(appName): \(taken.rawValue) as before the restart, waiting for pid \(alive.pid) to attach again",
                metadata: ["app": "\(appName)", "state": "\(taken.rawValue)", "pid": "\(alive.pid)"]
            )
        }
        state.counts[.notRunning, default: 0] += state.records.count - restoring.count
        return restoring
    }

    var count: Int { self.state.withLock { $0.records.count } }

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

    /// A reload changed the lifecycle's time limits: every app runs by the new ones from now on.
    func timingsChanged(_ timings: LifecycleTimings) {
        self.state.withLock { state in
            for name in state.records.keys { state.records[name]!.lifecycle.timings = timings }
        }
    }

    // MARK: Registry

    /// Registers an app for `uid`, or updates the declarations of one `uid` owns. The reply waits for the store's
    /// commit: a registration that was answered survives a crash.
    ///
    /// The change is made in memory first, so that a concurrent registration of the same new name by another user
    /// is refused at once (the first one owns it), and undone if the store cannot keep it.
    /// - Throws: ``AppError`` for a bad name, an app another user owns, the `limit`, or storage.
    func register(
        name: String,
        traits: AppTraits,
        launchUnit: LaunchUnitChange,
        declarations given: EventDeclarations,
        keeping: (kinds: Bool, posters: Bool, topics: Bool) = (false, false, false),
        uid: UInt32,
        limit: Int
    ) async throws(AppError) -> Snapshot {
        let appName = try Self.appName(name)
        let (registration, previous, previousDeclarations, declarations) = try self.state.withLock { state throws(AppError) in
            let previous = state.records[appName]
            let unit: String?
            switch launchUnit {
            case .keep: unit = previous?.registration.launchUnit
            case .clear: unit = nil
            case .set(let chosen, let byAdmin):
                // systemd starts the unit at root's request: only an admin may choose which.
                guard byAdmin || chosen == previous?.registration.launchUnit else {
                    throw .launchUnitNotAllowed(app: name, unit: chosen)
                }
                unit = chosen
            }
            var registration = AppRegistration(name: appName, owner: uid, traits: traits, launchUnit: unit)
            if let previous {
                guard previous.registration.mayBeActedFor(by: uid) else { throw .notOwner(app: name) }
                registration.owner = previous.registration.owner
            } else if state.records.count >= limit {
                throw .tooManyApps(limit: limit)
            }
            // What a registration leaves out, it keeps from the one before.
            var declarations = given
            if keeping.kinds, let previous { declarations.kinds = previous.declarations.kinds }
            if keeping.posters, let previous { declarations.posters = previous.declarations.posters }
            if keeping.topics, let previous { declarations.topics = previous.declarations.topics }
            // Declared now or kept from before: a kind can only wake the app into a mode it declares.
            if let (kind, mode) = declarations.undeclaredMode(among: traits.backgroundModes) {
                throw .backgroundModeNotDeclared(app: name, kind: kind.value, mode: mode)
            }
            self.apply(registration, declarations, in: &state)
            return (registration, previous?.registration, previous?.declarations, declarations)
        }
        do {
            try await self.store.save(registration, declarations: declarations.json.jsonText)
        } catch {
            self.state.withLock { state in
                guard state.records[appName]?.registration == registration else { return }
                if let previous {
                    self.apply(previous, previousDeclarations ?? EventDeclarations(), in: &state)
                } else if state.records[appName]?.lifecycle.state == .notRunning {
                    for topic in declarations.topics { state.subscribers[topic]?.remove(appName) }
                    state.records[appName] = nil
                    state.counts[.notRunning, default: 0] -= 1
                }
            }
            throw .storageFailed(reason: error.description)
        }
        return try self.state.withLock { state throws(AppError) in
            guard let record = state.records[appName] else { throw .storageFailed(reason: "registration undone") }
            return Self.snapshot(record)
        }
    }

    private func apply(_ registration: AppRegistration, _ declarations: EventDeclarations, in state: inout State) {
        if state.records[registration.name] == nil { state.counts[.notRunning, default: 0] += 1 }
        var record =
            state.records[registration.name]
            ?? Record(
                registration: registration,
                lifecycle: AppLifecycle(
                    traits: registration.traits,
                    timings: self.daemon.configuration.timings,
                    firstSequence: self.firstSequence
                ),
                since: wallClock(),
                inbox: AppInbox(kindLimit: self.daemon.configuration.maxKindsPerApp)
            )
        for topic in record.declarations.topics.subtracting(declarations.topics) {
            state.subscribers[topic]?.remove(registration.name)
        }
        for topic in declarations.topics { state.subscribers[topic, default: []].insert(registration.name) }
        record.registration = registration
        record.declarations = declarations
        record.lifecycle.traits = registration.traits
        state.records[registration.name] = record
    }

    /// Every app, by name.
    func list() -> [Snapshot] {
        self.state.withLock { state in
            state.records.values.map(Self.snapshot).sorted { $0.registration.name < $1.registration.name }
        }
    }

    /// One app, for the System side.
    /// - Throws: ``SystemError/noSuchApp(app:)``.
    func get(_ name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        guard let record = self.state.withLock({ $0.records[appName] }) else { throw .noSuchApp(app: name) }
        return Self.snapshot(record)
    }

    // MARK: The app side

    /// Serves an Attach until its stream ends: sends the current state, launches the app if it was not running,
    /// and then parks until the client hangs up, the app ends, or another Attach replaces this one.
    func attach(name: String, peer: VarlinkPeer, responder: VarlinkResponder) async throws(AppError) {
        let appName = try Self.appName(name)
        // Read only when the attach is going to launch the app: a running app's new stream needs none.
        var restored: String?
        let launches = self.state.withLock { state in
            state.records[appName].map { $0.lifecycle.state == .notRunning || ($0.attachment == nil && $0.restored != nil) }
        }
        if launches == true {
            do {
                restored = try self.store.savedState(of: appName)
            } catch {
                throw .storageFailed(reason: error.description)
            }
        }
        let process = ProcessHandle.connected(peer)
        let identity = process?.identity
        let id = try self.locked { state, log throws(AppError) in
            var record = try self.appRecord(appName, uid: peer.uid, in: state)
            let id = state.nextID
            state.nextID += 1
            var unsent: [JSONObject] = []
            if let waiting = record.restored {
                // The process that ran the app before the daemon's restart: it goes on where it was, and hears what
                // happened meanwhile. Any other: that process is not coming back, and this one is launched.
                waiting.timeout?.cancel()
                record.restored = nil
                state.records[appName] = record
                if waiting.identity == identity {
                    unsent = waiting.unsent
                } else {
                    let now = Instant.now
                    self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now, reason: .notReattached) }
                }
                record = state.records[appName]!
            }
            if let previous = record.attachment {
                // The old stream ends with Replaced; the app keeps running, now in the new stream's process.
                state.attached[previous.id] = nil
                self.endPark(previous.id, .replaced, in: &state)
                log.append(
                    LogEntry(
                        level: .info,
                        message: "\(appName): attach replaced by pid \(peer.pid)",
                        metadata: ["app": "\(appName)", "pid": "\(peer.pid)", "previous_pid": "\(previous.pid)"]
                    )
                )
            }
            record.attachment = Attachment(id: id, responder: responder, process: process, pid: peer.pid, identity: identity)
            record.termination = nil  // a new process: the old one's end runs on its own timers
            record.inbox.attached()
            responder.send(["state": .string(record.lifecycle.state.rawValue)])
            if !unsent.isEmpty { responder.send(all: unsent) }
            if record.lifecycle.receivesAtOnce {
                state.inboxActions.append((appName, self.inboxInput(&record) { inbox, reception, next in inbox.woke(reception, next: &next) }))
            }
            state.records[appName] = record
            state.attached[id] = appName
            state.parks[id] = Park()
            guard record.lifecycle.state == .notRunning else {
                self.recordState(appName, record)  // its process may be another one now
                return id
            }
            // Not running: a pending Launch says where it goes; otherwise its user opened it.
            let pending = record.pendingLaunch
            let destination = pending?.destination ?? .foreground
            let now = Instant.now
            if destination == .foreground { self.clearForeground(except: appName, now: now, in: &state, log: &log) }
            let launch = LaunchContext(destination: destination, restoredState: restored)
            self.input(appName, in: &state, log: &log, launch: launch) { lifecycle throws(LifecycleError) in
                try lifecycle.launch(destination, now: now)
            } onError: { _ in }  // a not-running app can always be launched
            if let pending {
                pending.timeout?.cancel()
                state.records[appName]!.pendingLaunch = nil
                for waiter in pending.waiters { waiter.resume() }
            }
            return id
        }
        switch await self.park(id) {
        case .replaced: throw .replaced(app: name)
        // Only a monitor's stream overruns; an app's ends with the app.
        case .overrun, .closed, .finished: responder.finish(["state": "notRunning"])
        }
    }

    /// The app has handled everything up to `sequence`.
    func acknowledge(name: String, uid: UInt32, upTo sequence: UInt64) throws(AppError) {
        let appName = try Self.appName(name)
        try self.locked { state, log throws(AppError) in
            if let termination = try self.appRecord(appName, uid: uid, in: state).termination,
                sequence >= termination.sequence
            {
                state.records[appName]!.termination = nil
                termination.acknowledged()
            }
            let decided = state.update(appName) { record in
                self.inboxInput(&record) { inbox, reception, next in inbox.acknowledged(upTo: sequence, reception, next: &next) }
            }
            if let decided { state.inboxActions.append((appName, decided)) }
            let now = Instant.now
            self.input(appName, in: &state, log: &log) { lifecycle in
                lifecycle.acknowledge(upTo: sequence, now: now)
            }
        }
    }

    func beginBackgroundTask(name: String, uid: UInt32, taskName: String) throws(AppError) -> (id: Int, remaining: Duration) {
        let appName = try Self.appName(name)
        return try self.locked { state, log throws(AppError) in
            var record = try self.appRecord(appName, uid: uid, in: state)
            let now = Instant.now
            do throws(LifecycleError) {
                let task = try record.lifecycle.beginBackgroundTask(name: taskName, now: now)
                self.reschedule(appName, &record, now: now)
                state.records[appName] = record
                return task
            } catch {
                throw AppError(error, app: appName, state: record.lifecycle.state)
            }
        }
    }

    func endBackgroundTask(name: String, uid: UInt32, id: Int) throws(AppError) {
        let appName = try Self.appName(name)
        try self.locked { state, log throws(AppError) in
            _ = try self.appRecord(appName, uid: uid, in: state)
            let now = Instant.now
            try self.input(appName, in: &state, log: &log, refusedAs: AppError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.endBackgroundTask(id, now: now)
            }
        }
    }

    /// Keeps `data` in the store for the app's next launch; returns once it is on disk.
    func saveState(name: String, uid: UInt32, data: String?) async throws(AppError) {
        let appName = try Self.appName(name)
        _ = try self.state.withLock { state throws(AppError) in try self.appRecord(appName, uid: uid, in: state) }
        let limit = self.daemon.configuration.maxSavedState
        if let data, data.utf8.count > limit {
            throw .stateTooLarge(app: name, size: data.utf8.count, limit: limit)
        }
        do {
            try await self.store.saveState(of: appName, data)
        } catch {
            throw .storageFailed(reason: error.description)
        }
    }

    // MARK: The system side

    /// Starts an app and returns once its process has attached and been launched.
    func launch(name: String, destination: LaunchDestination) async throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        let timeout = self.daemon.configuration.launchTimeout
        let unit = try self.state.withLock { state throws(SystemError) -> String? in
            guard var record = state.records[appName] else { throw .noSuchApp(app: name) }
            guard record.lifecycle.state == .notRunning else {
                throw .wrongState(
                    app: name,
                    state: record.lifecycle.state,
                    reason: LifecycleError.alreadyRunning(record.lifecycle.state).description
                )
            }
            if record.pendingLaunch == nil {
                var pending = PendingLaunch(destination: destination)
                pending.timeout = self.eventLoop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
                    self.launchTimedOut(appName, timeout: timeout)
                }
                record.pendingLaunch = pending
            } else {
                // A second Launch while one waits joins it; the later destination wins.
                record.pendingLaunch!.destination = destination
            }
            state.records[appName] = record
            return record.registration.launchUnit
        }
        if let unit {
            do {
                // A D-Bus call blocks: on NIO's thread pool, not on one of the few threads of Swift's task pool.
                let startUnit = self.startUnit
                try await NIOThreadPool.singleton.runIfActive { try startUnit(unit) }
            } catch {
                self.failLaunch(appName, .launchFailed(app: name, unit: unit, reason: "\(error)"))
                throw .launchFailed(app: name, unit: unit, reason: "\(error)")
            }
        }
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                self.state.withLock { state in
                    if state.records[appName]?.pendingLaunch != nil {
                        state.records[appName]!.pendingLaunch!.waiters.append(continuation)
                    } else if state.records[appName]?.lifecycle.state.isRunning == true {
                        continuation.resume()  // it attached before this call started waiting
                    } else {
                        continuation.resume(throwing: SystemError.launchTimedOut(app: name, timeout: timeout))
                    }
                }
            }
        } catch let error as SystemError {
            throw error
        } catch {
            throw .launchTimedOut(app: name, timeout: timeout)
        }
        return try self.get(name)
    }

    /// Brings a running app to the foreground.
    func activate(name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        return try self.locked { state, log throws(SystemError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            let now = Instant.now
            if record.lifecycle.state.isRunning, record.lifecycle.state != .active {
                self.clearForeground(except: appName, now: now, in: &state, log: &log)
            }
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.activate(now: now)
            }
            return Self.snapshot(state.records[appName]!)
        }
    }

    /// Sends an app (by default the foreground one) to the background.
    func deactivate(name: String?) throws(SystemError) -> Snapshot {
        try self.locked { state, log throws(SystemError) in
            let appName = try self.target(name, in: state) { $0.lifecycle.state.isForeground }
            let now = Instant.now
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.deactivate(now: now)
            }
            return Self.snapshot(state.records[appName]!)
        }
    }

    /// An interruption begins or ends for an app (by default the foreground one).
    func interrupt(name: String?, begins: Bool) throws(SystemError) -> Snapshot {
        try self.locked { state, log throws(SystemError) in
            let appName = try self.target(name, in: state) { record in
                begins ? record.lifecycle.state == .active : record.lifecycle.interrupted
            }
            let now = Instant.now
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                begins ? try lifecycle.interruptionBegan(now: now) : try lifecycle.interruptionEnded(now: now)
            }
            return Self.snapshot(state.records[appName]!)
        }
    }

    func terminate(name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        return try self.locked { state, log throws(SystemError) in
            guard state.records[appName] != nil else { throw .noSuchApp(app: name) }
            let now = Instant.now
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.terminate(now: now)
            }
            return Self.snapshot(state.records[appName]!)
        }
    }

    /// Purges the named suspended app, or the `count` suspended apps with the most resident memory.
    func purge(name: String?, count: Int) throws(SystemError) -> [AppName] {
        var largest: [AppName]?
        if name == nil {
            // Measured outside the lock: it reads /proc for every suspended app.
            let suspended = self.state.withLock { state in
                state.records.filter { $0.value.lifecycle.state == .suspended }.mapValues { $0.attachment?.process }
            }
            guard !suspended.isEmpty else { throw .nothingToPurge }
            let sizes = suspended.mapValues { $0?.residentBytes ?? 0 }
            largest = suspended.keys.sorted { (sizes[$0]!, $1) > (sizes[$1]!, $0) }
        }
        return try self.locked { state, log throws(SystemError) in
            let chosen: [AppName]
            if let name {
                let appName = try Self.systemAppName(name)
                guard state.records[appName] != nil else { throw .noSuchApp(app: name) }
                chosen = [appName]
            } else {
                // Still suspended now that the lock is held again.
                chosen = Array((largest ?? []).filter { state.records[$0]?.lifecycle.state == .suspended }.prefix(count))
                guard !chosen.isEmpty else { throw .nothingToPurge }
            }
            let now = Instant.now
            for appName in chosen {
                try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                    try lifecycle.purge(now: now)
                }
            }
            return chosen
        }
    }

    /// Serves a Monitor until its client hangs up or stops reading.
    func monitor(responder: VarlinkResponder) async throws(SystemError) {
        let id = self.state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.monitors[id] = responder
            state.parks[id] = Park()
            responder.send([:])
            return id
        }
        switch await self.park(id) {
        case .overrun: responder.failAndClose(SystemError.monitorOverrun(bound: Self.monitorBacklogBound))
        case .replaced, .closed, .finished: responder.finish()
        }
    }

    // MARK: Carrying out the core's effects

    /// Runs `body` under the lock; afterwards writes what it logged and carries out what the inboxes decided.
    private func locked<T, Failure: Error>(
        _ body: (inout State, inout [LogEntry]) throws(Failure) -> T
    ) throws(Failure) -> T {
        var log: [LogEntry] = []
        var decided: [(AppName, [InboxAction])] = []
        defer {
            for entry in log { self.logger.log(level: entry.level, "\(entry.message)", metadata: entry.metadata) }
            for (appName, actions) in decided { self.carryOut(actions, of: appName, failure: nil) }
        }
        return try self.state.withLock { state throws(Failure) in
            defer {
                decided = state.inboxActions
                state.inboxActions.removeAll()
                for (_, actions) in decided { self.count(actions, in: &state) }
            }
            return try body(&state, &log)
        }
    }

    /// Feeds one request to an app's lifecycle and carries out its effects; a refusal becomes the calling
    /// interface's error (`refusedAs`: WrongState, or NoSuchTask) and changes nothing.
    private func input<Refusal: LifecycleRefusal>(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        refusedAs: Refusal.Type,
        _ body: (inout AppLifecycle<Instant>) throws(LifecycleError) -> [LifecycleEffect]
    ) throws(Refusal) {
        let before = state.records[appName]!.lifecycle.state
        try self.input(appName, in: &state, log: &log, launch: nil, body) { error throws(Refusal) in
            throw Refusal(error, app: appName, state: before)
        }
    }

    private func input<Failure: Error>(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        launch: LaunchContext?,
        _ body: (inout AppLifecycle<Instant>) throws(LifecycleError) -> [LifecycleEffect],
        onError: (LifecycleError) throws(Failure) -> Void
    ) throws(Failure) {
        var record = state.records[appName]!
        let wasReceiving = record.lifecycle.receivesAtOnce
        let before = (state: record.lifecycle.state, interrupted: record.lifecycle.interrupted)
        let effects: [LifecycleEffect]
        do {
            effects = try body(&record.lifecycle)
        } catch {
            try onError(error)
            return
        }
        self.apply(effects, app: appName, record: &record, state: &state, log: &log, launch: launch)
        if !wasReceiving, record.lifecycle.receivesAtOnce {
            // After the callbacks the effects sent: a wake's events follow them.
            state.inboxActions.append((appName, self.inboxInput(&record) { inbox, reception, next in inbox.woke(reception, next: &next) }))
        }
        self.reschedule(appName, &record, now: .now)
        if record.lifecycle.state != before.state || record.lifecycle.interrupted != before.interrupted {
            if !record.lifecycle.state.isRunning, let restored = record.restored {
                restored.timeout?.cancel()
                record.restored = nil
            }
            self.recordState(appName, record)
        }
        state.records[appName] = record
    }

    /// Requests that cannot be refused (acknowledgements, the clock).
    private func input(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        _ body: (inout AppLifecycle<Instant>) -> [LifecycleEffect]
    ) {
        self.input(appName, in: &state, log: &log, launch: nil, body) { _ in }  // body cannot fail
    }

    private func apply(
        _ effects: [LifecycleEffect],
        app: AppName,
        record: inout Record,
        state: inout State,
        log: inout [LogEntry],
        launch: LaunchContext?
    ) {
        var current = effects.first.flatMap { effect -> AppState? in
            if case .transition(let from, _, _) = effect { return from }
            return nil
        } ?? record.lifecycle.state
        var lastDelivered: UInt64 = 0
        for effect in effects {
            switch effect {
            case .deliver(let callback, let sequence, let task):
                lastDelivered = sequence
                guard record.attachment != nil || record.restored != nil else { continue }
                var event: JSONObject = ["seq": .int(Int64(sequence)), "kind": .string(callback.kind)]
                if let task { event["task"] = .int(Int64(task)) }
                if callback == .didFinishLaunching {
                    var options: JSONObject = [
                        "destination": .string((launch?.destination ?? .foreground).rawValue)
                    ]
                    if let restored = launch?.restoredState { options["restoredState"] = .string(restored) }
                    event["launchOptions"] = .object(options)
                }
                let reply: JSONObject = ["state": .string(current.rawValue), "callback": .object(event)]
                if let attachment = record.attachment {
                    attachment.responder.send(reply)
                } else {
                    // The process of an app taken up after a restart has not attached again: it gets the callback
                    // when it does (within its deadline, if it has one).
                    record.restored?.unsent.append(reply)
                }
                if callback == .backgroundTaskWillExpire {
                    log.append(
                        LogEntry(
                            level: .notice,
                            message: "\(app): background task \(task ?? 0) is about to expire",
                            metadata: [
                                "app": "\(app)", "task": "\(task ?? 0)", "message_id": "\(MessageID.taskExpiring)",
                            ]
                        )
                    )
                }
            case .transition(let from, let to, let reason):
                current = to
                if to.isForeground { state.onScreen.insert(app) } else { state.onScreen.remove(app) }
                state.counts[from, default: 0] -= 1
                state.counts[to, default: 0] += 1
                record.since = wallClock()
                state.transitions += 1
                log.append(Self.transitionEntry(app: app, from: from, to: to, reason: reason, pid: record.attachment?.pid))
                self.tellMonitors(app: app, from: from, to: to, reason: reason, time: record.since, state: &state)
            case .kill:
                // The transition that follows is the journal entry, with the pid.
                record.process?.handle?.signal(SIGKILL)
                if let attachment = record.attachment { self.endStream(attachment, in: &state) }
                record.attachment = nil
            case .terminate:
                if let attachment = record.attachment { self.endStream(attachment, in: &state) }
                // An app waiting to attach again after a restart of the daemon hears nothing: it gets SIGTERM after
                // the grace, as an app that does not acknowledge willTerminate does.
                if let process = record.process?.handle {
                    let termination = Termination(
                        app: app,
                        process: process,
                        sequence: lastDelivered,
                        grace: self.daemon.configuration.terminateGrace,
                        eventLoop: self.eventLoop,
                        logger: self.logger
                    )
                    record.termination = termination
                    termination.start()
                }
                record.attachment = nil
            }
        }
    }

    /// The journal entry for one transition; its MESSAGE_ID says what kind of event it was.
    private static func transitionEntry(
        app: AppName,
        from: AppState,
        to: AppState,
        reason: TransitionReason,
        pid: Int32?
    ) -> LogEntry {
        let level: Logger.Level
        let messageID: String
        let what: String
        switch reason {
        case .launchNotAcknowledged, .backgroundNotAcknowledged:
            level = .warning
            messageID = MessageID.deadlineMissed
            what = reason == .launchNotAcknowledged
                ? "killed: didFinishLaunching was not acknowledged in time"
                : "killed: didEnterBackground was not acknowledged in time"
        case .backgroundTasksExpired:
            level = .notice
            messageID = MessageID.tasksExpired
            what = "background tasks expired, \(to == .notRunning ? "terminated" : "tasks ended")"
        case .purge:
            level = .notice
            messageID = MessageID.purged
            what = "purged to reclaim memory"
        default:
            level = .info
            messageID = MessageID.transition
            what = "\(from.rawValue) → \(to.rawValue) (\(reason.rawValue))"
        }
        var metadata: Logger.Metadata = [
            "app": "\(app)", "from": "\(from.rawValue)", "to": "\(to.rawValue)", "reason": "\(reason.rawValue)",
            "message_id": "\(messageID)",
        ]
        if let pid { metadata["pid"] = "\(pid)" }
        return LogEntry(level: level, message: "\(app): \(what)", metadata: metadata)
    }

    private func tellMonitors(
        app: AppName,
        from: AppState,
        to: AppState,
        reason: TransitionReason,
        time: Double,
        state: inout State
    ) {
        guard !state.monitors.isEmpty else { return }
        let reply: JSONObject = [
            "transition": [
                "app": .string(app.value), "from": .string(from.rawValue), "to": .string(to.rawValue),
                "reason": .string(reason.rawValue), "time": .double(time),
            ]
        ]
        for (id, monitor) in state.monitors {
            if monitor.backlog > Self.monitorBacklogBound {
                state.monitors[id] = nil
                self.endPark(id, .overrun, in: &state)
            } else {
                monitor.send(reply)
            }
        }
    }

    /// Ends an app's stream with its last reply: the app is not running any more.
    private func endStream(_ attachment: Attachment, in state: inout State) {
        state.attached[attachment.id] = nil
        attachment.responder.finish(["state": "notRunning"])
        self.endPark(attachment.id, .finished, in: &state)
    }

    /// Another app takes the foreground: every app on screen but `appName` goes to the background.
    private func clearForeground(except appName: AppName, now: Instant, in state: inout State, log: inout [LogEntry]) {
        guard self.daemon.configuration.exclusiveForeground else { return }
        for other in state.onScreen where other != appName {
            try? self.input(other, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.deactivate(now: now)
            }
        }
    }

    /// Arms the app's timer for its next deadline.
    private func reschedule(_ appName: AppName, _ record: inout Record, now: Instant) {
        record.deadline?.cancel()
        record.deadline = nil
        guard let deadline = record.lifecycle.nextDeadline else { return }
        let delay = max(.zero, now.duration(to: deadline))
        record.deadline = self.eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
            self.deadlineReached(appName)
        }
    }

    private func deadlineReached(_ appName: AppName) {
        self.locked { state, log in
            guard state.records[appName] != nil else { return }
            let now = Instant.now
            self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.timePassed(now: now) }
        }
    }

    /// An app taken up at start-up whose process has not attached again: it no longer counts as the app (its next
    /// attach launches it anew).
    private func reattachTimedOut(_ appName: AppName, timeout: Duration) {
        self.locked { state, log in
            guard let restored = state.records[appName]?.restored else { return }
            let reason: TransitionReason = restored.process.isAlive ? .notReattached : .processExited
            let now = Instant.now
            self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now, reason: reason) }
            if reason == .notReattached {
                log.append(
                    LogEntry(
                        level: .notice,
                        message: "\(appName): pid \(restored.process.pid) did not attach again within \(timeout.seconds) s of the restart",
                        metadata: ["app": "\(appName)", "pid": "\(restored.process.pid)"]
                    )
                )
            }
        }
    }

    /// Records the app's state and the process running it, for a restart of the daemon to take up.
    private func recordState(_ appName: AppName, _ record: Record) {
        var recorded = Store.RecordedState(state: record.lifecycle.state, interrupted: record.lifecycle.interrupted)
        if recorded.state.isRunning, let process = record.process {
            recorded.pid = process.pid
            recorded.process = process.identity
        }
        self.store.record(recorded, of: appName)
    }

    private func launchTimedOut(_ appName: AppName, timeout: Duration) {
        self.failLaunch(appName, .launchTimedOut(app: appName.value, timeout: timeout))
        self.logger.warning(
            "\(appName): did not attach within \(timeout.seconds) s of Launch",
            metadata: ["app": "\(appName)", "message_id": "\(MessageID.launchTimedOut)"]
        )
    }

    private func failLaunch(_ appName: AppName, _ error: SystemError) {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard let pending = state.records[appName]?.pendingLaunch else { return [] }
            pending.timeout?.cancel()
            state.records[appName]!.pendingLaunch = nil
            return pending.waiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    // MARK: Parked streams

    private func park(_ id: Int) async -> StreamEnd {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<StreamEnd, Never>) in
                self.state.withLock { state in
                    if let end = state.parks[id]?.end {
                        state.parks[id] = nil
                        continuation.resume(returning: end)
                    } else {
                        state.parks[id]?.continuation = continuation
                    }
                }
            }
        } onCancel: {
            // Cancellation can run inside a write this manager makes under its lock (a write to a peer that is gone
            // closes the channel at once, and closing cancels the call's task): take the lock later, on the loop.
            self.eventLoop.execute { self.streamClosed(id) }
        }
    }

    /// A parked stream's client went away. For an attached app that means its process is gone.
    private func streamClosed(_ id: Int) {
        self.locked { state, log in
            state.monitors[id] = nil
            if let appName = state.attached.removeValue(forKey: id), state.records[appName]?.attachment?.id == id {
                state.records[appName]!.attachment = nil
                let now = Instant.now
                self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now) }
            }
            self.endPark(id, .closed, in: &state)
        }
    }

    private func endPark(_ id: Int, _ end: StreamEnd, in state: inout State) {
        guard var park = state.parks[id] else { return }
        if let continuation = park.continuation {
            state.parks[id] = nil
            continuation.resume(returning: end)
        } else if park.end == nil {
            park.end = end
            state.parks[id] = park
        }
    }

    // MARK: Lookups

    private static func appName(_ name: String) throws(AppError) -> AppName {
        do { return try AppName(name) } catch { throw AppError(error) }
    }

    /// For the System side, which names apps that exist: a name that cannot be one is no such app.
    static func systemAppName(_ name: String) throws(SystemError) -> AppName {
        guard let appName = try? AppName(name) else { throw .noSuchApp(app: name) }
        return appName
    }

    /// The record of an app the caller may act for, for the App side.
    private func appRecord(_ appName: AppName, uid: UInt32, in state: State) throws(AppError) -> Record {
        guard let record = state.records[appName] else { throw .notRegistered(app: appName.value) }
        guard record.registration.mayBeActedFor(by: uid) else { throw .notOwner(app: appName.value) }
        return record
    }

    /// The app a System call names, or the one `matches` picks when it names none.
    private func target(_ name: String?, in state: State, matches: (Record) -> Bool) throws(SystemError) -> AppName {
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

    private static func snapshot(_ record: Record) -> Snapshot {
        Snapshot(
            registration: record.registration,
            state: record.lifecycle.state,
            pid: record.process?.pid,
            attached: record.attachment != nil,
            tasks: record.lifecycle.tasks.count,
            since: record.since
        )
    }
}

/// What a registration does to the app's launch unit.
enum LaunchUnitChange: Sendable {
    /// Left out: as before.
    case keep
    /// An empty name: none.
    case clear
    /// A unit, and whether the caller is an admin (only an admin may choose a new one).
    case set(String, byAdmin: Bool)
}

/// The end of a terminated app's process: SIGTERM once it acknowledged willTerminate or after the grace period,
/// then SIGKILL if it still runs a grace period later.
final class Termination: Sendable {
    let app: AppName
    let process: ProcessHandle
    /// The willTerminate's sequence number.
    let sequence: UInt64
    private let grace: Duration
    private let eventLoop: any EventLoop
    let logger: Logger
    private let signalled = NIOLockedValueBox(false)

    init(app: AppName, process: ProcessHandle, sequence: UInt64, grace: Duration, eventLoop: any EventLoop, logger: Logger) {
        self.app = app
        self.process = process
        self.sequence = sequence
        self.grace = grace
        self.eventLoop = eventLoop
        self.logger = logger
    }

    func start() {
        self.eventLoop.scheduleTask(in: .nanoseconds(self.grace.nanoseconds)) { self.signalTerm() }
    }

    func acknowledged() {
        self.signalTerm()
    }

    private func signalTerm() {
        let first = self.signalled.withLockedValue { signalled in
            defer { signalled = true }
            return !signalled
        }
        guard first, self.process.signal(SIGTERM) else { return }
        self.eventLoop.scheduleTask(in: .nanoseconds(self.grace.nanoseconds)) {
            guard self.process.isAlive, self.process.signal(SIGKILL) else { return }
            self.logger.warning(
                "\(self.app): pid \(self.process.pid) did not exit within \(self.grace.seconds) s of SIGTERM; killed",
                metadata: ["app": "\(self.app)", "pid": "\(self.process.pid)", "message_id": "\(MessageID.killedAfterGrace)"]
            )
        }
    }
}

/// Seconds since the Unix epoch.
func wallClock() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

