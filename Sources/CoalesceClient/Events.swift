import CoalesceWire
import Synchronization
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The app's deliveries as an `AsyncSequence`: ``CoalescedApp/events``.
public struct Events: AsyncSequence, Sendable {
    public typealias Element = Delivery
    public typealias Failure = CoalescedError

    let app: CoalescedApp

    public func makeAsyncIterator() -> Iterator { Iterator(app: self.app) }

    /// Attaches on the first `next()`; acknowledges each delivery on the `next()` after it.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = Delivery
        public typealias Failure = CoalescedError

        private let app: CoalescedApp
        /// Cancels the stream when the iterator goes away (a loop left with `break`, or its task ended).
        private let handle: StreamHandle
        private var started = false
        private var ended = false
        /// The delivery last handed out: its loop body ended when `next()` is called again.
        private var previous: Received?
        /// The highest event number handled and not acknowledged, and how many events that covers.
        private var handled: Int?
        private var handledCount = 0
        /// Past this many, an Ack goes out even in the middle of a burst.
        private static let mostUnacknowledged = 256

        init(app: CoalescedApp) {
            self.app = app
            self.handle = StreamHandle(StreamSession())
        }

        public mutating func next() async throws(CoalescedError) -> Delivery? {
            try await self.next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CoalescedError) -> Delivery? {
            if self.ended { return nil }
            let session = self.handle.session
            if !self.started {
                self.started = true
                let app = self.app
                app.onStreamThread { session.read(for: app) }
            }
            if let previous = self.previous {
                self.previous = nil
                try await self.acknowledge(after: previous, moreWaiting: session.hasBuffered, isolation: actor)
            }
            while true {
                let step = await withTaskCancellationHandler {
                    await session.take()
                } onCancel: {
                    session.cancel()
                }
                switch step {
                case .received(let received):
                    self.app.setState(received.state)
                    guard let delivery = received.delivery else {
                        // A callback this library does not know yet: acknowledged, so that its deadline is met.
                        try await self.acknowledge(received.sequence, isolation: actor)
                        continue
                    }
                    self.previous = received
                    return delivery
                case .finished:
                    self.ended = true
                    // What was handled before the stream's end (willTerminate, or the app killed) is acknowledged
                    // if the daemon still takes it; it comes again otherwise.
                    if let handled = self.handled { try? await self.acknowledge(handled, isolation: actor) }
                    return nil
                case .cancelled:
                    self.ended = true
                    return nil
                case .failed(let error):
                    self.ended = true
                    throw error
                }
            }
        }

        /// The loop body that received `previous` ended. Lifecycle callbacks are acknowledged at once (their
        /// deadlines run), which covers the events before them; events a burst at a time, since an Ack covers
        /// everything up to its number: one round trip and one store write instead of one per event.
        private mutating func acknowledge(
            after previous: Received,
            moreWaiting: Bool,
            isolation actor: isolated (any Actor)?
        ) async throws(CoalescedError) {
            switch previous.acknowledgement {
            case .now:
                try await self.acknowledge(previous.sequence, isolation: actor)
            case .burst:
                self.handled = previous.sequence
                self.handledCount += 1
                if !moreWaiting || self.handledCount >= Self.mostUnacknowledged {
                    try await self.acknowledge(previous.sequence, isolation: actor)
                }
            case .never:
                // Acknowledging willTerminate would have the daemon send SIGTERM at once; the stream ends next
                // instead, and the app exits on its own. What was handled before it is acknowledged, though.
                if let handled = self.handled { try await self.acknowledge(handled, isolation: actor) }
            }
        }

        private mutating func acknowledge(_ sequence: Int, isolation actor: isolated (any Actor)?) async throws(CoalescedError) {
            self.handled = nil
            self.handledCount = 0
            do throws(CoalescedError) {
                _ = try await self.app.request("io.coalesced.App.Ack", ["seq": .int(Int64(sequence))], includesApp: true)
            } catch .connectionLost, .daemonUnreachable {
                // The daemon is restarting: what was not acknowledged comes again once the stream is attached again.
            }
        }
    }
}

/// One delivery as read from the stream, with what acknowledging it means.
struct Received: Sendable {
    enum Acknowledgement: Sendable {
        /// A lifecycle callback: at once.
        case now
        /// An event: with the rest of its burst.
        case burst
        /// willTerminate.
        case never
    }

    /// `nil` for a callback this library does not know.
    var delivery: Delivery?
    var sequence: Int
    /// The app's state after it.
    var state: AppState
    var acknowledgement: Acknowledgement

    init(_ callback: JSONValue, state: AppState, app: CoalescedApp) throws(StreamSession.UnexpectedReply) {
        guard let sequence = callback["seq"]?.intValue, let kind = callback["kind"]?.stringValue else {
            throw StreamSession.UnexpectedReply(reason: "a callback without seq or kind")
        }
        self.sequence = Int(sequence)
        self.state = state
        self.acknowledgement = .now
        let prefix = "lifecycle."
        if kind.hasPrefix("scene.") {
            // A scene's callback: acknowledged as the app's own are, as soon as it is handled.
            self.delivery = Self.scene(kind.dropFirst("scene.".count), callback)
            return
        }
        guard kind.hasPrefix(prefix) else {
            self.acknowledgement = .burst
            if let notification = Self.notification(kind, callback["payload"]) {
                self.delivery = notification
                return
            }
            let payload = callback["payload"].flatMap { $0.resolved == .null ? nil : $0.jsonText }
            self.delivery = .event(
                Event(
                    sequence: Int(sequence),
                    kind: kind,
                    payloadJSON: payload,
                    count: Int(callback["count"]?.intValue ?? 1),
                    firstPosted: callback["firstPosted"]?.doubleValue ?? 0,
                    lastPosted: callback["lastPosted"]?.doubleValue ?? 0,
                    dropped: callback["dropped"]?.intValue.map { Int($0) }
                )
            )
            return
        }
        switch kind.dropFirst(prefix.count) {
        case "willFinishLaunching", "didFinishLaunching":
            let options = LaunchOptions(wire: callback["launchOptions"])
            self.delivery = kind.hasSuffix(".willFinishLaunching") ? .willFinishLaunching(options) : .didFinishLaunching(options)
        case "backgroundRefresh":
            // An event the daemon posts: acknowledged with its burst, as events are.
            self.acknowledgement = .burst
            let payload = callback["payload"]
            self.delivery = payload?["id"]?.stringValue.map { id in
                Delivery.backgroundRefresh(
                    BackgroundRefresh(id: id, budget: .milliseconds(Int64((payload?["budgetSec"]?.doubleValue ?? 0) * 1000)))
                )
            }
        case "openURL":
            // An event the daemon posts: acknowledged with its burst, as events are.
            self.acknowledgement = .burst
            self.delivery = OpenedURLForm.read(callback["payload"]).map { .openURL($0) }
        case "didBecomeActive": self.delivery = .didBecomeActive
        case "willResignActive": self.delivery = .willResignActive
        case "didEnterBackground": self.delivery = .didEnterBackground
        case "willEnterForeground": self.delivery = .willEnterForeground
        case "willTerminate":
            self.delivery = .willTerminate
            self.acknowledgement = .never
        case "backgroundTaskWillExpire":
            // Without a task: the wake's own time.
            if let id = callback["task"]?.intValue.map({ Int($0) }) {
                self.delivery = .backgroundTaskWillExpire(app.task(id))
            } else {
                self.delivery = .backgroundTimeWillExpire
            }
        case "didReceiveMemoryWarning": self.delivery = .didReceiveMemoryWarning
        case "significantTimeChange": self.delivery = .significantTimeChange
        case "protectedDataWillBecomeUnavailable": self.delivery = .protectedDataWillBecomeUnavailable
        case "protectedDataDidBecomeAvailable": self.delivery = .protectedDataDidBecomeAvailable
        default: self.delivery = nil
        }
    }
}

extension Received {
    /// The daemon's notification events as their deliveries; `nil` for any other kind, and for a payload this
    /// library does not read (such as a queue's overflow marker, which has none), which then comes as the event it is.
    static func notification(_ kind: String, _ payload: JSONValue?) -> Delivery? {
        guard let payload, payload.resolved != .null else { return nil }
        switch kind {
        case "notification.willPresent":
            return (try? AlertPresentationForm(wire: payload)).map { .willPresent(NotificationPresentation($0)) }
        case "notification.didReceiveResponse":
            return (try? AlertResponseForm(wire: payload)).map { .didReceiveResponse(NotificationResponse($0)) }
        default: return nil
        }
    }
}

/// Cancels its session when the last iterator copy holding it goes away.
final class StreamHandle: Sendable {
    let session: StreamSession
    init(_ session: StreamSession) { self.session = session }
    deinit { self.session.cancel() }
}

/// One attached stream: the stream thread reads it (``read(for:)``) into a buffer that the iterator takes from.
final class StreamSession: Sendable {
    struct UnexpectedReply: Error {
        var reason: String
    }

    enum Step: Sendable {
        case received(Received)
        case finished
        case cancelled
        case failed(CoalescedError)
    }

    private enum Ending {
        case finished
        case cancelled
        case failed(CoalescedError)
    }

    private struct State {
        /// Read and not yet taken.
        var buffer: [Received] = []
        var ending: Ending?
        /// The iterator, waiting for the next delivery.
        var waiter: CheckedContinuation<Void, Never>?
        /// The stream's socket while it is open, for ``cancel()`` to shut down; cleared before it is closed.
        var descriptor: CInt?
    }

    private let state = Mutex(State())

    var hasBuffered: Bool { self.state.withLock { !$0.buffer.isEmpty } }

    private var isCancelled: Bool {
        self.state.withLock { state in
            if case .cancelled? = state.ending { return true }
            return false
        }
    }

    /// The next delivery, or the stream's end; waits for it.
    func take() async -> Step {
        while true {
            let step = self.state.withLock { state -> Step? in
                if !state.buffer.isEmpty { return .received(state.buffer.removeFirst()) }
                switch state.ending {
                case .finished?: return .finished
                case .cancelled?: return .cancelled
                case .failed(let error)?: return .failed(error)
                case nil: return nil
                }
            }
            if let step { return step }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = self.state.withLock { state -> Bool in
                    if !state.buffer.isEmpty || state.ending != nil { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Ends the stream from the app's side: the socket is shut down, which ends the blocking read, and the daemon
    /// takes the closed stream as the app's exit.
    func cancel() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ending = .cancelled
            state.buffer.removeAll()
            if let descriptor = state.descriptor { shutdown(descriptor, CInt(SHUT_RDWR)) }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private func push(_ received: Received) {
        self.wake { state in
            guard state.ending == nil else { return }
            state.buffer.append(received)
        }
    }

    private func end(_ ending: Ending) {
        self.wake { state in
            if state.ending == nil { state.ending = ending }
        }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Whether the stream may go on with `descriptor` (not when it was cancelled meanwhile).
    private func open(_ descriptor: CInt) -> Bool {
        self.state.withLock { state in
            if case .cancelled? = state.ending { return false }
            state.descriptor = descriptor
            return true
        }
    }

    private func closing() {
        self.state.withLock { $0.descriptor = nil }
    }

    /// On the stream thread: registers, attaches and reads the stream into the buffer until it ends, reconnecting
    /// when the connection is lost after it was attached.
    func read(for app: CoalescedApp) {
        var attached = false
        var backoff: Duration = .milliseconds(100)
        while !self.isCancelled {
            let failure: CoalescedError
            do {
                _ = try app.requestBlocking(
                    "io.coalesced.App.Register",
                    app.declaration.registerParameters,
                    includesApp: false
                )
                let stream = try VarlinkClient(path: app.socketPath)
                guard self.open(stream.descriptor) else { return }
                defer { self.closing() }
                try stream.callMore("io.coalesced.App.Attach", ["app": .string(app.declaration.name)]) { reply in
                    guard let name = reply["state"]?.stringValue, let state = AppState(rawValue: name) else {
                        throw UnexpectedReply(reason: "an Attach reply without a state")
                    }
                    attached = true
                    backoff = .milliseconds(100)
                    guard let callback = reply["callback"], callback.resolved != .null else {
                        app.setState(state)
                        return
                    }
                    self.push(try Received(callback, state: state, app: app))
                }
                self.end(.finished)
                return
            } catch let error as VarlinkError {
                self.end(.failed(CoalescedError(error)))
                return
            } catch let error as UnexpectedReply {
                self.end(.failed(.connectionLost(reason: "unexpected reply from coalesced: \(error.reason)")))
                return
            } catch let error as VarlinkClientError {
                failure = CoalescedError(error)
            } catch let error as CoalescedError {
                switch error {
                case .connectionLost, .daemonUnreachable: failure = error
                default:
                    self.end(.failed(error))
                    return
                }
            } catch {
                failure = .connectionLost(reason: "\(error)")
            }
            if self.isCancelled { return }
            guard attached else {
                self.end(.failed(failure))
                return
            }
            // The daemon is restarting. Try again; what was read and not yet handled comes again after the
            // attach, renumbered.
            app.connectionWasLost()
            self.state.withLock { $0.buffer.removeAll() }
            self.sleep(backoff)
            backoff = min(backoff * 2, .seconds(2))
        }
    }

    /// Sleeps for `duration`, or less when the stream is cancelled meanwhile.
    private func sleep(_ duration: Duration) {
        let step = Duration.milliseconds(50)
        var left = duration
        while left > .zero, !self.isCancelled {
            let (seconds, attoseconds) = min(left, step).components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
            left -= step
        }
    }
}
