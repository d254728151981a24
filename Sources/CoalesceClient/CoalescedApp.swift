import CoalesceWire
import NIOPosix
public import ServiceLifecycle
import Synchronization
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// One app's connection to coalesced.
///
/// ```swift
/// let app = CoalescedApp(AppDeclaration(name: "org.example.notes"))
/// for try await delivery in app.events {
///     if case .event(let event) = delivery { print(try event.decode(Badge.self)) }
/// }   // each delivery is acknowledged when the loop body ends
/// ```
///
/// ``events`` registers the app, attaches its stream and delivers its lifecycle callbacks and events; the other
/// methods are the app's requests: ``post(to:kind:payload:policy:)``, background tasks, saved state and local
/// notifications (``schedule(_:)``). As a `Service` it serves an ``AppDelegate`` in a `ServiceGroup`, and ends with
/// the group's graceful shutdown.
///
/// The blocking socket I/O runs on two threads of the app's own (one for the stream, one for requests), never on
/// the threads of Swift's concurrency pool. Two connections are used, as Varlink serves one call at a time per
/// connection: the attached stream, and one for requests.
public final class CoalescedApp: Service, Sendable {
    /// What the app registers.
    public let declaration: AppDeclaration
    /// The daemon's socket.
    public let socketPath: String
    private let delegate: (any AppDelegate)?

    private struct Shared {
        var state: AppState = .notRunning
        /// Background tasks begun and not ended, for ``Delivery/backgroundTaskWillExpire(_:)``.
        var tasks: [Int: BackgroundTask] = [:]
    }

    /// Small and never held across I/O.
    private let shared = Mutex(Shared())
    /// The request connection, held for one call at a time.
    private let requests = Mutex<VarlinkClient?>(nil)
    /// Runs the requests' blocking calls.
    private let requestThread: NIOThreadPool
    /// Runs the stream's blocking reads.
    private let streamThread: NIOThreadPool

    /// The socket coalesced serves: `$COALESCED_SOCKET` when set, the system instance's otherwise.
    public static var defaultSocketPath: String {
        if let path = getenv("COALESCED_SOCKET") { return String(cString: path) }
        return InstancePaths.systemSocket
    }

    /// An app that is to register `declaration` with the daemon at `socketPath`. Nothing is sent before
    /// ``register()``, ``events`` or a request.
    /// - Parameters:
    ///   - declaration: What the app registers: its name, and how each kind of event is held.
    ///   - socketPath: The daemon's socket; ``defaultSocketPath`` by default.
    ///   - delegate: What ``run()`` serves, as a `Service`; without one, ``run()`` acknowledges everything.
    public init(
        _ declaration: AppDeclaration,
        socketPath: String = CoalescedApp.defaultSocketPath,
        delegate: (any AppDelegate)? = nil
    ) {
        self.declaration = declaration
        self.socketPath = socketPath
        self.delegate = delegate
        self.requestThread = NIOThreadPool(numberOfThreads: 1)
        self.requestThread.start()
        self.streamThread = NIOThreadPool(numberOfThreads: 1)
        self.streamThread.start()
    }

    deinit {
        self.requestThread.shutdownGracefully { _ in }
        self.streamThread.shutdownGracefully { _ in }
    }

    /// The app's state, as the daemon last reported it with what ``events`` delivered.
    public var state: AppState { self.shared.withLock { $0.state } }

    /// The app's lifecycle callbacks and events, in the order the daemon sent them.
    ///
    /// Iterating registers the app, attaches its stream (which launches it when it is not running) and delivers
    /// each callback and event; one is acknowledged when the loop body that received it ends, so a body that
    /// hangs misses the callback's deadline, as on iOS. The events of a burst (a wake delivers one per kind at
    /// once) are acknowledged together when the burst ends. The sequence ends after ``Delivery/willTerminate``,
    /// and the process should then exit.
    ///
    /// A lost connection after the stream was attached (the daemon restarting) is retried with backoff, up to two
    /// seconds apart, for as long as it takes; the daemon took up the app's state, so the app goes on where it
    /// was. Iterate it once at a time: a second iteration attaches again and ends the first with
    /// ``CoalescedError/replaced(app:)``. Cancelling the iterating task closes the stream, which tells the daemon
    /// the app has exited.
    ///
    /// It throws ``CoalescedError/daemonUnreachable(socketPath:reason:)`` when the first connection fails, and the
    /// daemon's refusals, such as ``CoalescedError/notOwner(app:)``.
    public var events: Events { Events(app: self) }

    /// Registers the app, or updates its declarations; attaching (``events``) registers too.
    public func register() async throws(CoalescedError) {
        _ = try await self.request("io.coalesced.App.Register", self.declaration.registerParameters, includesApp: false)
    }

    /// Posts an event to an app (`target`: its name, or `topic:NAME` for every app subscribed to a topic): it is
    /// delivered at once to an app running code, and held, folded by the kind's policy, for one that is not.
    /// - Parameters:
    ///   - target: An app's name, or `topic:NAME`.
    ///   - kind: Lower-case labels separated by dots, such as `mail.received`; not under `lifecycle.`.
    ///   - payload: Encoded with a `JSONEncoder`; it must encode to a JSON object.
    ///   - policy: How the kind is held when this post opens it and the app declared nothing for it.
    /// - Returns: Whether an app received it at once, and to how many apps it went.
    @discardableResult
    public func post(
        to target: String,
        kind: String,
        payload: some Encodable & Sendable,
        policy: KindDeclaration? = nil
    ) async throws(CoalescedError) -> PostResult {
        var parameters: JSONObject = [
            "target": .string(target),
            "kind": .string(kind),
            "payload": .object(try payloadObject(payload, kind: kind)),
        ]
        if let policy { parameters["policy"] = policy.wire }
        let reply = try await self.request("io.coalesced.App.Post", parameters, includesApp: false)
        guard let delivered = reply["delivered"]?.boolValue, let recipients = reply["recipients"]?.intValue else {
            throw .connectionLost(reason: "a Post reply without delivered or recipients")
        }
        let refused = (reply["refused"]?.arrayValue ?? []).compactMap { entry -> PostResult.Refusal? in
            guard let app = entry["app"]?.stringValue, let name = entry["error"]?.stringValue else { return nil }
            let error = VarlinkError(name: name, parameters: entry["parameters"]?.objectValue ?? [:])
            return PostResult.Refusal(app: app, error: CoalescedError(error))
        }
        return PostResult(delivered: delivered, recipients: Int(recipients), refused: refused)
    }

    /// Posts an event without a payload (`{}`).
    @discardableResult
    public func post(to target: String, kind: String, policy: KindDeclaration? = nil) async throws(CoalescedError) -> PostResult {
        try await self.post(to: target, kind: kind, payload: [String: Int](), policy: policy)
    }

    /// Opens a background task: while the app holds one in the background it is not suspended, until its
    /// background time runs out (``Delivery/backgroundTaskWillExpire(_:)`` comes shortly before).
    /// - Parameter name: For the journal; at most 64 bytes.
    public func beginBackgroundTask(_ name: String) async throws(CoalescedError) -> BackgroundTask {
        let reply = try await self.request("io.coalesced.App.BeginBackgroundTask", ["name": .string(name)], includesApp: true)
        guard let id = reply["id"]?.intValue else {
            throw .connectionLost(reason: "a BeginBackgroundTask reply without id")
        }
        // No remainingSec: the daemon gives background tasks no budget (BackgroundTaskBudgetSec=infinity).
        let remaining = reply["remainingSec"]?.doubleValue.map { Duration.milliseconds(Int64($0 * 1000)) }
        let task = BackgroundTask(id: Int(id), name: name, remaining: remaining)
        self.shared.withLock { $0.tasks[task.id] = task }
        return task
    }

    /// The background time the app has left, as UIKit's `backgroundTimeRemaining`: in the background, or woken for
    /// its events, what is left of its budget; in the foreground, the whole budget; `nil` when the daemon gives
    /// none (`BackgroundTaskBudgetSec=infinity`).
    public func backgroundTimeRemaining() async throws(CoalescedError) -> Duration? {
        let reply = try await self.request("io.coalesced.App.GetBackgroundTimeRemaining", [:], includesApp: true)
        return reply["remainingSec"]?.doubleValue.map { Duration.milliseconds(Int64($0 * 1000)) }
    }

    /// Opens `url` with the app that handles it among the user's own, as `xdg-open` does (App.Open): `app` names
    /// one where several declare its scheme (or `type`); `background` wakes or launches it into the background
    /// instead of the foreground. Returns the app that opens it, once the URL is on the daemon's disk.
    /// - Throws: ``CoalescedError`` with `NoHandler`, `AmbiguousHandler` or `LaunchesHeld` as the daemon refuses it.
    public func open(
        _ url: String,
        type: String? = nil,
        with app: String? = nil,
        background: Bool = false
    ) async throws(CoalescedError) -> String {
        var parameters: JSONObject = ["url": .string(url), "background": .bool(background)]
        if let type { parameters["type"] = .string(type) }
        if let app { parameters["app"] = .string(app) }
        let reply = try await self.request("io.coalesced.App.Open", parameters, includesApp: false)
        return reply["app"]?.stringValue ?? ""
    }

    /// Schedules a background refresh (App.ScheduleRefresh): the daemon sends ``Delivery/backgroundRefresh(_:)`` no
    /// earlier than `after` from now, within `flex` after that at a time shared with other apps, once `requires`
    /// holds, and again `every` period if given; the app is woken or launched into the background for it, for
    /// `budget`. An id already scheduled is replaced, or with `keep` kept.
    /// - Throws: ``CoalescedError`` (`InvalidRefresh` past the daemon's `[Refresh]` limits, `TooManyRefreshes`).
    public func scheduleRefresh(
        _ id: String,
        after: Duration = .zero,
        every interval: Duration? = nil,
        flex: Duration? = nil,
        requires: Set<RefreshCondition> = [],
        budget: Duration? = nil,
        late: RefreshLatePolicy = .runOnce,
        keep: Bool = false
    ) async throws(CoalescedError) {
        func seconds(_ duration: Duration) -> JSONValue {
            let (seconds, attoseconds) = duration.components
            return .double(Double(seconds) + Double(attoseconds) / 1e18)
        }
        var parameters: JSONObject = [
            "id": .string(id), "after": seconds(after), "requires": .array(requires.sorted().map { .string($0.rawValue) }),
            "late": .string(late.rawValue), "keep": .bool(keep),
        ]
        if let interval { parameters["intervalSec"] = seconds(interval) }
        if let flex { parameters["flexSec"] = seconds(flex) }
        if let budget { parameters["budgetSec"] = seconds(budget) }
        _ = try await self.request("io.coalesced.App.ScheduleRefresh", parameters, includesApp: true)
    }

    /// Cancels a scheduled refresh.
    public func cancelRefresh(_ id: String) async throws(CoalescedError) {
        _ = try await self.request("io.coalesced.App.CancelRefresh", ["id": .string(id)], includesApp: true)
    }

    /// Says how a run of a refresh went: a done one is due again a period later; a failed one is tried again after a
    /// backoff.
    public func refreshDone(_ refresh: BackgroundRefresh, success: Bool) async throws(CoalescedError) {
        _ = try await self.request(
            "io.coalesced.App.RefreshDone", ["id": .string(refresh.id), "success": .bool(success)], includesApp: true
        )
    }

    /// Closes a background task.
    public func endBackgroundTask(_ task: BackgroundTask) async throws(CoalescedError) {
        _ = self.shared.withLock { $0.tasks.removeValue(forKey: task.id) }
        _ = try await self.request("io.coalesced.App.EndBackgroundTask", ["id": .int(Int64(task.id))], includesApp: true)
    }

    /// Keeps `data` for the next launch, whose `LaunchOptions.restoredState` hands it back (`nil` forgets it);
    /// it is on the daemon's disk when this returns.
    public func saveState(_ data: String?) async throws(CoalescedError) {
        _ = try await self.request("io.coalesced.App.SaveState", ["data": data.map { .string($0) } ?? .null], includesApp: true)
    }

    /// Keeps what the app needs to restore `scene` (`nil`: forgets it), on disk when this returns: it comes back in
    /// ``SceneConnectionOptions/restoredState`` when the same scene connects again, after a restart of the app or
    /// of the daemon. Kept for the 64 scenes saved last.
    /// - Throws: ``CoalescedError`` as the daemon refuses it (`StateTooLarge` past its `MaxSavedState=`).
    public func saveSceneState(_ data: String?, for scene: Scene) async throws(CoalescedError) {
        _ = try await self.request(
            "io.coalesced.App.SaveSceneState", ["scene": .string(scene.id), "data": data.map { .string($0) } ?? .null],
            includesApp: true
        )
    }

    /// Serves ``events`` to `delegate` until the app is terminated (it returns after
    /// ``AppDelegate/appWillTerminate(_:)``) or the task is cancelled.
    public func run(delegate: any AppDelegate) async throws(CoalescedError) {
        for try await delivery in self.events {
            await delegate.app(self, handle: delivery)
        }
    }

    /// The `Service`: serves the delegate given to ``init(_:socketPath:delegate:)`` until the app is terminated or
    /// the service group shuts down gracefully, which closes the stream (the daemon takes that as the app's exit).
    public func run() async throws {
        let delegate: any AppDelegate = self.delegate ?? AcknowledgingDelegate()
        try await cancelWhenGracefulShutdown {
            try await self.run(delegate: delegate)
        }
    }

    // MARK: Internals

    func setState(_ state: AppState) {
        self.shared.withLock { $0.state = state }
    }

    /// The task a backgroundTaskWillExpire names.
    func task(_ id: Int) -> BackgroundTask {
        self.shared.withLock { $0.tasks[id] } ?? BackgroundTask(id: id, name: "", remaining: nil)
    }

    /// The daemon's restart ended the background tasks: their ids may come again for new tasks.
    func connectionWasLost() {
        self.requests.withLock { $0 = nil }
        self.shared.withLock { $0.tasks.removeAll() }
    }

    /// A request, on the request thread.
    func request(_ method: String, _ parameters: JSONObject, includesApp: Bool) async throws(CoalescedError) -> JSONObject {
        let result: Result<JSONObject, CoalescedError>
        do {
            result = try await self.requestThread.runIfActive { () -> Result<JSONObject, CoalescedError> in
                do throws(CoalescedError) {
                    return .success(try self.requestBlocking(method, parameters, includesApp: includesApp))
                } catch {
                    return .failure(error)
                }
            }
        } catch {
            throw .connectionLost(reason: "the app's request thread has stopped")
        }
        return try result.get()
    }

    /// One call on the request connection, which is opened on first use and again after it was lost.
    func requestBlocking(_ method: String, _ parameters: JSONObject, includesApp: Bool) throws(CoalescedError) -> JSONObject {
        var parameters = parameters
        if includesApp { parameters["app"] = .string(self.declaration.name) }
        let outcome = self.requests.withLock { requests -> Result<JSONObject, CoalescedError> in
            do {
                let client: VarlinkClient
                if let open = requests {
                    client = open
                } else {
                    client = try VarlinkClient(path: self.socketPath)
                    // A daemon that stops answering fails the call instead of hanging the app.
                    client.setReceiveTimeout(.seconds(30))
                }
                requests = client
                return .success(try client.call(method, parameters))
            } catch let error as VarlinkError {
                return .failure(CoalescedError(error))
            } catch let error as VarlinkClientError {
                requests = nil
                return .failure(CoalescedError(error))
            } catch {
                requests = nil
                return .failure(.connectionLost(reason: "\(error)"))
            }
        }
        return try outcome.get()
    }

    /// Runs `body` on the stream thread.
    func onStreamThread(_ body: @escaping @Sendable () -> Void) {
        self.streamThread.submit { state in
            guard case .active = state else { return }
            body()
        }
    }
}

/// What a post did.
public struct PostResult: Sendable, Hashable {
    /// A subscriber of a topic that refused the post, with the error it would have replied.
    public struct Refusal: Sendable, Hashable {
        public var app: String
        public var error: CoalescedError
    }

    /// Whether an app received it at once (it was running code); otherwise it is held.
    public var delivered: Bool
    /// How many apps it went to.
    public var recipients: Int
    /// For a topic: the subscribers that refused it, while the others kept it.
    public var refused: [Refusal]
}

/// The delegate ``CoalescedApp/run()`` serves when it was given none: it handles nothing, and so acknowledges
/// everything.
private struct AcknowledgingDelegate: AppDelegate {}
