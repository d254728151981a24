public import CoalesceCore
public import CoalesceWire
import Synchronization
public import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// What an app declares about itself when it registers.
public struct AppDeclaration: Sendable, Hashable {
    /// Reverse-DNS, such as `org.example.mail`.
    public var name: String
    /// Background modes (audio, voip, …): with any, the app is not suspended in the background.
    public var backgroundModes: [String]
    /// Instead of being suspended the app is told willTerminate and terminated.
    public var exitsOnSuspend: Bool
    /// A systemd service that launches the app.
    public var launchUnit: String?
    /// How each event kind is held while the app is suspended; kinds not named are `latest`. `nil` keeps what the
    /// app declared before; `[:]` clears it.
    public var kinds: [String: KindDeclaration]?
    /// Who may post to the app besides its own user and root; `nil` keeps what it declared before.
    public var posters: Posters?
    /// Topics the app subscribes to; `nil` keeps what it declared before.
    public var topics: [String]?

    public init(
        name: String,
        backgroundModes: [String] = [],
        exitsOnSuspend: Bool = false,
        launchUnit: String? = nil,
        kinds: [String: KindDeclaration]? = nil,
        posters: Posters? = nil,
        topics: [String]? = nil
    ) {
        self.name = name
        self.backgroundModes = backgroundModes
        self.exitsOnSuspend = exitsOnSuspend
        self.launchUnit = launchUnit
        self.kinds = kinds
        self.posters = posters
        self.topics = topics
    }

    /// Register's parameters.
    var registerParameters: JSONObject {
        var parameters: JSONObject = [
            "name": .string(self.name),
            "backgroundModes": .array(self.backgroundModes.map { .string($0) }),
            "exitsOnSuspend": .bool(self.exitsOnSuspend),
            "launchUnit": self.launchUnit.map { .string($0) } ?? .null,
        ]
        if let kinds = self.kinds { parameters["kinds"] = .object(JSONObject(kinds.map { ($0.key, $0.value.wire) })) }
        if let posters = self.posters { parameters["posters"] = posters.wire }
        if let topics = self.topics { parameters["topics"] = .array(topics.map { .string($0) }) }
        return parameters
    }
}

/// What didFinishLaunching hands the app.
public struct LaunchOptions: Sendable, Hashable {
    /// Where the launch put the app.
    public var destination: LaunchDestination
    /// What the app last kept with ``Application/saveState(_:)``, if anything.
    public var restoredState: String?
}

/// An event posted to the app: one kind and what its posts add up to (one post, while the app runs; all posts of
/// the kind since it was suspended, coalesced by the kind's policy, when it wakes).
public struct Event: Sendable, Hashable {
    /// Its number in the app's stream: always increasing; an event not acknowledged comes again with a new one.
    public var sequence: Int64
    public var kind: String
    /// What the posts add up to; `nil` for count and for a queue's overflow marker.
    public var payload: JSONValue?
    /// How many posts this event stands for.
    public var count: Int
    /// When the first and the last of them were posted, seconds since the Unix epoch.
    public var firstPosted: Double
    public var lastPosted: Double
    /// For a queue's overflow marker: how many of the oldest posts were dropped.
    public var dropped: Int?
}

/// An open background task.
public struct BackgroundTask: Sendable, Hashable {
    public var id: Int
    /// Background time left when it began; `nil` when the daemon gives background tasks no budget
    /// (`BackgroundTaskBudgetSec=infinity`, `coalesced --no-deadlines`).
    public var remaining: Duration?
}

/// The app's side of its lifecycle. Every method has a default that does nothing; an app implements those it
/// cares about. Each is called on the thread that runs ``Application/run(delegate:)``, one at a time, in the
/// order the daemon sent them; the daemon hears that a callback was handled when its method returns.
public protocol ApplicationDelegate: AnyObject, Sendable {
    func application(_ application: Application, didFinishLaunchingWith options: LaunchOptions)
    func applicationDidBecomeActive(_ application: Application)
    func applicationWillResignActive(_ application: Application)
    func applicationDidEnterBackground(_ application: Application)
    func applicationWillEnterForeground(_ application: Application)
    func applicationWillTerminate(_ application: Application)
    /// The other callbacks: didReceiveMemoryWarning, significantTimeChange, protectedData…
    func application(_ application: Application, didReceive callback: LifecycleCallback)
    /// An event posted to the app.
    func application(_ application: Application, didReceive event: Event)
}

extension ApplicationDelegate {
    public func application(_ application: Application, didFinishLaunchingWith options: LaunchOptions) {}
    public func applicationDidBecomeActive(_ application: Application) {}
    public func applicationWillResignActive(_ application: Application) {}
    public func applicationDidEnterBackground(_ application: Application) {}
    public func applicationWillEnterForeground(_ application: Application) {}
    public func applicationWillTerminate(_ application: Application) {}
    public func application(_ application: Application, didReceive callback: LifecycleCallback) {}
    public func application(_ application: Application, didReceive event: Event) {}
}

/// Why ``Application/run(delegate:)`` could not go on.
public enum ApplicationError: Error, CustomStringConvertible {
    /// The daemon refused a request; `name` is the Varlink error, such as `io.coalesced.App.NotOwner`.
    case refused(name: String, parameters: JSONObject)
    /// The daemon's reply made no sense.
    case unexpectedReply(String)

    public var description: String {
        switch self {
        case .refused(let name, let parameters):
            let details = parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            return details.isEmpty ? name : "\(name) (\(details))"
        case .unexpectedReply(let reason): return "unexpected reply from coalesced: \(reason)"
        }
    }
}

/// One app's connection to coalesced: it registers, attaches, calls the delegate for each callback and
/// acknowledges it once the delegate returns, and reconnects when the daemon restarts.
///
/// Two connections are used, as Varlink serves one call at a time per connection: the attached stream, and one
/// for requests (acknowledgements, background tasks, saved state).
public final class Application: Sendable {
    public let declaration: AppDeclaration
    public let socketPath: String

    private struct Shared {
        var state: AppState = .notRunning
        var expirationHandlers: [Int: @Sendable () -> Void] = [:]
    }

    /// Small and never held across I/O.
    private let shared = Mutex(Shared())
    /// The request connection, held for one call at a time.
    private let requests = Mutex<VarlinkClient?>(nil)

    /// The socket coalesced serves: `$COALESCED_SOCKET` when set, the system instance's otherwise.
    public static var defaultSocketPath: String {
        if let path = getenv("COALESCED_SOCKET") { return String(cString: path) }
        return InstancePaths(instance: .system).socket
    }

    public init(_ declaration: AppDeclaration, socketPath: String = Application.defaultSocketPath) {
        self.declaration = declaration
        self.socketPath = socketPath
    }

    /// The app's state, as the daemon last said.
    public var state: AppState { self.shared.withLock { $0.state } }

    /// Registers, attaches and serves the delegate until the app is terminated: after willTerminate it returns, and
    /// the process should exit (the daemon sends SIGTERM after `TerminateGraceSec=` otherwise). A lost connection is retried with backoff, up to two seconds apart, for as long as it takes: a
    /// daemon restart costs the app nothing but a new launch.
    /// - Throws: ``ApplicationError/refused(name:parameters:)`` when the daemon refuses the app (another user owns
    ///   the name, another process attached for it, …).
    public func run(delegate: some ApplicationDelegate) throws(ApplicationError) {
        var backoff: Duration = .milliseconds(100)
        while true {
            do {
                try self.attachOnce(delegate: delegate)
                return
            } catch let error as VarlinkError {
                throw .refused(name: error.varlinkName, parameters: error.varlinkParameters)
            } catch let error as ApplicationError {
                throw error
            } catch {
                // Connection lost or refused: the daemon is restarting. Try again. Its background tasks died with
                // it; their handlers go, so that a new task with an old id is never mistaken for an old one.
                self.requests.withLock { $0 = nil }
                self.shared.withLock { $0.expirationHandlers.removeAll() }
                sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
    }

    /// Opens a background task; `expirationHandler` runs when the daemon says its time is nearly up.
    public func beginBackgroundTask(
        _ name: String,
        expirationHandler: @escaping @Sendable () -> Void = {}
    ) throws(ApplicationError) -> BackgroundTask {
        let reply = try self.request("io.coalesced.App.BeginBackgroundTask", ["name": .string(name)])
        guard let id = reply["id"]?.intValue else { throw .unexpectedReply("BeginBackgroundTask without id") }
        self.shared.withLock { $0.expirationHandlers[Int(id)] = expirationHandler }
        let remaining = reply["remainingSec"]?.doubleValue.map { Duration.milliseconds(Int64($0 * 1000)) }
        return BackgroundTask(id: Int(id), remaining: remaining)
    }

    /// Closes a background task.
    public func endBackgroundTask(_ task: BackgroundTask) throws(ApplicationError) {
        _ = self.shared.withLock { $0.expirationHandlers.removeValue(forKey: task.id) }
        _ = try self.request("io.coalesced.App.EndBackgroundTask", ["id": .int(Int64(task.id))])
    }

    /// Keeps `data` for the next launch (nil forgets it); on the daemon's disk when this returns.
    public func saveState(_ data: String?) throws(ApplicationError) {
        _ = try self.request("io.coalesced.App.SaveState", ["data": data.map { .string($0) } ?? .null])
    }

    // MARK: Internals

    private func attachOnce(delegate: some ApplicationDelegate) throws {
        _ = try self.requestThrowingAnything("io.coalesced.App.Register", self.declaration.registerParameters, includesApp: false)
        let stream = try VarlinkClient(path: self.socketPath)
        var acknowledgements = Acknowledgements()
        try stream.callMore("io.coalesced.App.Attach", ["app": .string(self.declaration.name)]) { reply in
            guard let stateName = reply["state"]?.stringValue, let state = AppState(rawValue: stateName) else {
                throw ApplicationError.unexpectedReply("Attach reply without a state")
            }
            self.shared.withLock { $0.state = state }
            guard let callback = reply["callback"] else { return }
            try self.dispatch(callback, to: delegate, acknowledgements: &acknowledgements, moreWaiting: stream.hasPendingInput)
        }
    }

    /// Events handled and not yet acknowledged. An Ack covers everything up to its number, so the events of a
    /// burst (a wake delivers one per kind at once) are acknowledged together once the burst ends: one round trip
    /// and one store write instead of one per event. Lifecycle callbacks are acknowledged at once (their
    /// deadlines run), and that covers the events before them.
    private struct Acknowledgements {
        /// The highest event number handled and not acknowledged.
        var handled: Int64?
        var count = 0
        /// Past this many, an Ack goes out even in the middle of a burst.
        static let most = 256
    }

    private func dispatch(
        _ callback: JSONValue,
        to delegate: some ApplicationDelegate,
        acknowledgements: inout Acknowledgements,
        moreWaiting: Bool
    ) throws {
        guard let sequence = callback["seq"]?.intValue, let kind = callback["kind"]?.stringValue else {
            throw ApplicationError.unexpectedReply("a callback without seq or kind")
        }
        guard kind.hasPrefix("lifecycle.") else {
            delegate.application(
                self,
                didReceive: Event(
                    sequence: sequence,
                    kind: kind,
                    payload: callback["payload"],
                    count: Int(callback["count"]?.intValue ?? 1),
                    firstPosted: callback["firstPosted"]?.doubleValue ?? 0,
                    lastPosted: callback["lastPosted"]?.doubleValue ?? 0,
                    dropped: callback["dropped"]?.intValue.map { Int($0) }
                )
            )
            acknowledgements.handled = sequence
            acknowledgements.count += 1
            if !moreWaiting || acknowledgements.count >= Acknowledgements.most {
                try self.acknowledge(sequence, &acknowledgements)
            }
            return
        }
        switch LifecycleCallback(rawValue: String(kind.dropFirst("lifecycle.".count))) {
        case .didFinishLaunching?:
            let options = callback["launchOptions"]
            delegate.application(
                self,
                didFinishLaunchingWith: LaunchOptions(
                    destination: options?["destination"]?.stringValue.flatMap(LaunchDestination.init) ?? .foreground,
                    restoredState: options?["restoredState"]?.stringValue
                )
            )
        case .didBecomeActive?: delegate.applicationDidBecomeActive(self)
        case .willResignActive?: delegate.applicationWillResignActive(self)
        case .didEnterBackground?: delegate.applicationDidEnterBackground(self)
        case .willEnterForeground?: delegate.applicationWillEnterForeground(self)
        case .willTerminate?: delegate.applicationWillTerminate(self)
        case .backgroundTaskWillExpire?:
            let task = callback["task"]?.intValue.map { Int($0) }
            let handler = self.shared.withLock { shared in task.flatMap { shared.expirationHandlers[$0] } }
            handler?()
        case let other?: delegate.application(self, didReceive: other)
        case nil: break  // a kind this library does not know yet: acknowledged, so deadlines are met
        }
        // Acknowledging willTerminate would tell the daemon to send SIGTERM at once; instead the stream ends next
        // and run() returns, so that the app can exit on its own.
        if kind == LifecycleCallback.willTerminate.kind {
            // What was handled before it is acknowledged, though.
            if let handled = acknowledgements.handled { try self.acknowledge(handled, &acknowledgements) }
            return
        }
        try self.acknowledge(sequence, &acknowledgements)
    }

    private func acknowledge(_ sequence: Int64, _ acknowledgements: inout Acknowledgements) throws {
        _ = try self.requestThrowingAnything("io.coalesced.App.Ack", ["seq": .int(sequence)], includesApp: true)
        acknowledgements = Acknowledgements()
    }

    private func request(_ method: String, _ parameters: JSONObject) throws(ApplicationError) -> JSONObject {
        do {
            return try self.requestThrowingAnything(method, parameters, includesApp: true)
        } catch let error as VarlinkError {
            throw .refused(name: error.varlinkName, parameters: error.varlinkParameters)
        } catch {
            throw .refused(name: "io.coalesced.Client.Unreachable", parameters: ["reason": .string("\(error)")])
        }
    }

    /// One call on the request connection, which is opened on first use and again after it was lost.
    private func requestThrowingAnything(
        _ method: String,
        _ parameters: JSONObject,
        includesApp: Bool
    ) throws -> JSONObject {
        var parameters = parameters
        if includesApp { parameters["app"] = .string(self.declaration.name) }
        return try self.requests.withLock { requests throws in
            let client: VarlinkClient
            if let open = requests {
                client = open
            } else {
                client = try VarlinkClient(path: self.socketPath)
                // A daemon that stops answering fails the call instead of hanging the app.
                client.setReceiveTimeout(.seconds(30))
            }
            requests = client
            do {
                return try client.call(method, parameters)
            } catch let error as VarlinkClientError {
                requests = nil
                throw error
            }
        }
    }
}

private func sleep(for duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
}
