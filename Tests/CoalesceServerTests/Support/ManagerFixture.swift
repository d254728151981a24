import CoalesceCore
@testable import CoalesceServer
@testable import CoalesceStore
import CoalesceTestSupport
import Logging
import NIOEmbedded
import Synchronization
import Testing
import Varlink

/// The manager in process, without sockets: the real ``AppManager`` over the real store in a temporary directory,
/// on a ``ManualClock``, with fake processes and units. Apps attach as ``TestApp``s. Made by
/// ``withManager(configuration:directory:processes:units:logs:_:)``.
final class ManagerFixture: Sendable {
    let manager: AppManager
    /// The daemon's configuration and limits, as the manager and the interfaces read them.
    let daemon: DaemonState
    let clock: ManualClock
    let store: Store
    let directory: TemporaryDirectory
    let processes: FakeProcesses
    let units: FakeUnits
    let logs: LogCapture
    private let apps = TestMutex<[TestApp]>([])
    private let monitors = TestMutex<[MonitorStream]>([])

    init(
        manager: AppManager, daemon: DaemonState, clock: ManualClock, store: Store, directory: TemporaryDirectory,
        processes: FakeProcesses, units: FakeUnits, logs: LogCapture
    ) {
        self.manager = manager
        self.daemon = daemon
        self.clock = clock
        self.store = store
        self.directory = directory
        self.processes = processes
        self.units = units
        self.logs = logs
    }

    /// Registers `name` as a client of `uid` does (`io.coalesced.App.Register`), with no limit to speak of: `kinds`,
    /// `posters` and `topics` as on the wire, each kept as it was when left out; the launch unit and the suspension
    /// mode as given, kept unless given.
    @discardableResult
    func register(
        _ name: String,
        traits: AppTraits = AppTraits(),
        launchUnit: LaunchUnitChange = .keep,
        suspension: SuspensionChange = .keep,
        kinds: JSONValue? = nil,
        posters: JSONValue? = nil,
        topics: JSONValue? = nil,
        windowIDs: Set<String>? = nil,
        urlSchemes: Set<String>? = nil,
        mimeTypes: Set<String>? = nil,
        uid: UInt32 = 0
    ) async throws -> AppManager.Snapshot {
        try await self.manager.register(
            name: name,
            traits: traits,
            launchUnit: launchUnit,
            suspension: suspension,
            windowIDs: windowIDs,
            opens: (urlSchemes, mimeTypes),
            declarations: try EventDeclarations(kinds: kinds, posters: posters, topics: topics),
            keeping: (kinds: kinds == nil, posters: posters == nil, topics: topics == nil),
            uid: uid,
            limit: 1_000
        )
    }

    /// Attaches a process (a new fake one unless given) as the app `name`; waits until the manager took it.
    func attach(_ name: String, process: FakeProcess? = nil, uid: UInt32 = 0) async throws -> TestApp {
        let app = try await TestApp.attach(
            name, to: self.manager, loop: self.clock.loop, process: process ?? self.processes.spawn(), uid: uid
        )
        self.apps.withLock { $0.append(app) }
        return app
    }

    /// Attaches a process as the app `name` (registered already), acknowledges its launch, sends it home and
    /// acknowledges that: returns it suspended, with nothing left unread.
    func attachSuspended(_ name: String, uid: UInt32 = 0) async throws -> TestApp {
        let app = try await self.attach(name, uid: uid)
        _ = try await app.sent()
        try app.acknowledge()
        _ = try self.manager.deactivate(name: name)
        _ = try await app.sent()
        try app.acknowledge()
        try await waitUntil("\(name) to be suspended") { try app.state == .suspended }
        return app
    }

    /// Starts a monitor (`io.coalesced.System.Monitor`) of what `filter` asks for; returns once it is in place.
    /// Unless `reading`, its client stops reading after the first reply (``MonitorStream/resumeReading()``).
    func monitor(_ filter: MonitorFilter = MonitorFilter(), reading: Bool = true) async throws -> MonitorStream {
        let monitor = try await MonitorStream.start(filter, on: self.manager, loop: self.clock.loop, reading: reading)
        self.monitors.withLock { $0.append(monitor) }
        return monitor
    }

    /// Starts a `System.Launch` of `name` as an operator does, and returns it once the manager has taken it: the
    /// launch waits for the app's process to attach, and the task's value is its answer (or its error).
    func launch(_ name: String, destination: LaunchDestination = .foreground) async throws -> Task<AppManager.Snapshot, any Error> {
        let answered = TestMutex(false)
        let launch = Task {
            defer { answered.withLock { $0 = true } }
            return try await self.manager.launch(name: name, destination: destination)
        }
        let appName = try AppName(name)
        try await waitUntil("the manager to take the Launch of \(name)") { () async throws -> Bool in
            // One that was answered at once (refused) has been taken too: its task has the answer.
            answered.withLock { $0 } || self.manager.state.withLock { $0.records[appName]?.pendingLaunch != nil }
        }
        return launch
    }

    /// Posts as a client of `uid` does (`io.coalesced.App.Post`) and waits for the answer, which comes once the post
    /// is on disk: whether an app was sent it at once. Throws the error the poster would hear.
    @discardableResult
    func post(
        _ target: String, _ kind: String, _ payload: JSONValue, policy: CoalescingPolicy? = nil, uid: UInt32 = 0
    ) async throws -> Bool {
        let peer = VarlinkPeer(pid: 1 << 30 - 1, uid: uid, gid: uid, groups: [])
        let result = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<AppManager.PostResult, any Error>) in
            do {
                try self.manager.post(target: target, kind: kind, payload: payload, policy: policy, peer: peer) {
                    continuation.resume(returning: $0)
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
        return try result.get().delivered
    }

    /// Posts each of `posts` to `target` in order, as a client of `uid` that sends its calls without waiting for
    /// the answers (pipelined); then waits for every answer. Whether an app was sent each one at once, in order.
    func post(
        _ target: String, each posts: [(kind: String, payload: JSONValue)], uid: UInt32 = 0
    ) async throws -> [Bool] {
        let peer = VarlinkPeer(pid: 1 << 30 - 1, uid: uid, gid: uid, groups: [])
        let answers = PostAnswers(count: posts.count)
        for (index, post) in posts.enumerated() {
            try self.manager.post(target: target, kind: post.kind, payload: post.payload, policy: nil, peer: peer) {
                answers.answered(index, $0)
            }
        }
        return try await answers.all().map { try $0.get().delivered }
    }

    /// The daemon stops, as on SIGTERM: it leaves the apps as they are for the next start (their processes run on),
    /// ends every app's stream still open and waits for the calls to return.
    fileprivate func stop() async {
        self.manager.daemonStopping()
        for app in self.apps.withLock({ $0 }) {
            // An Attach that failed has said so to the test that made it.
            try? await app.hangUp()
        }
        for monitor in self.monitors.withLock({ $0 }) {
            // A monitor's call ends without an error of its own when its client goes.
            try? await monitor.hangUp()
        }
    }
}

/// Runs `body` on a ``ManagerFixture``, then stops as the daemon does (the apps left as they are, their streams
/// ended) and closes the store: another call on the same `directory` and `processes` is a restart of the daemon.
/// - Parameters:
///   - configuration: the daemon's; by default with a launch acknowledgement deadline of 5 s.
///   - directory: the state directory; a new one unless given (a restart gives the last one's).
///   - processes: the processes that exist (a restart takes up those that outlived the last start).
///   - logs: where the manager's log goes, for the test to read.
func withManager<T>(
    configuration: Configuration? = nil,
    directory: TemporaryDirectory? = nil,
    processes: FakeProcesses = FakeProcesses(),
    units: FakeUnits? = nil,
    logs: LogCapture = LogCapture(),
    _ body: (ManagerFixture) async throws -> T
) async throws -> T {
    let directory = try directory ?? TemporaryDirectory()
    let configuration = configuration ?? {
        var configuration = Configuration()
        configuration.timings.launchAcknowledgement = .seconds(5)
        return configuration
    }()
    let clock = ManualClock()
    let units = units ?? FakeUnits(processes: processes)
    let store = try await openStore(directory)
    let daemon = DaemonState(configuration: configuration)
    let manager = try AppManager(
        store: store,
        daemon: daemon,
        eventLoop: clock.loop,
        logger: Logger(label: "test", factory: { _ in logs }),
        startUnit: { _ in },
        unitControl: units.control,
        now: { clock.now },
        wall: { clock.wall },
        processes: processes.opener
    )
    let fixture = ManagerFixture(
        manager: manager, daemon: daemon, clock: clock, store: store, directory: directory, processes: processes,
        units: units, logs: logs
    )
    let result: T
    do {
        result = try await body(fixture)
    } catch {
        await fixture.stop()
        try? await store.close()  // the test's error is the one to report
        await clock.shutDown()
        throw error
    }
    await fixture.stop()
    try await store.close()
    await clock.shutDown()
    return result
}

/// The answers to posts sent together, each kept where it belongs as it comes; ``all()`` waits for the last.
private final class PostAnswers: Sendable {
    private struct Waiting {
        var results: [AppManager.PostResult?]
        var left: Int
        var continuation: CheckedContinuation<[AppManager.PostResult], Never>?
    }

    private let waiting: TestMutex<Waiting>

    init(count: Int) {
        self.waiting = TestMutex(Waiting(results: Array(repeating: nil, count: count), left: count))
    }

    func answered(_ index: Int, _ result: AppManager.PostResult) {
        typealias Done = (CheckedContinuation<[AppManager.PostResult], Never>, [AppManager.PostResult])
        let done = self.waiting.withLock { waiting -> Done? in
            waiting.results[index] = result
            waiting.left -= 1
            guard waiting.left == 0, let continuation = waiting.continuation else { return nil }
            waiting.continuation = nil
            return (continuation, waiting.results.map { $0! })
        }
        if let (continuation, results) = done { continuation.resume(returning: results) }
    }

    func all() async -> [AppManager.PostResult] {
        await withCheckedContinuation { continuation in
            let results = self.waiting.withLock { waiting -> [AppManager.PostResult]? in
                guard waiting.left > 0 else { return waiting.results.map { $0! } }
                waiting.continuation = continuation
                return nil
            }
            if let results { continuation.resume(returning: results) }
        }
    }
}

/// A configuration read from `text`, as a `coalesced.conf` that holds it.
func configuration(_ text: String) throws -> Configuration {
    try Configuration.parse([ConfigurationSource(path: "coalesced.conf", text: text)])
}
