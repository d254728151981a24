import CoalesceCore
import CoalesceWire
import Systemd
import Varlink

/// The agent's one thread: it streams the daemon's presentations, shows them through the desktop's notification
/// server, and answers the daemon with what the user did with them.
///
/// Nothing here waits longer than the call timeout: presentations the desktop cannot take now (no server, a failed
/// or slow Notify) wait in a bounded queue for a server to appear or for the next try, and responses the daemon
/// cannot take now (it restarts) wait in another.
final class Agent {
    /// At most this many presentations wait for the desktop; the oldest goes first when more come.
    static let queueLimit = 64
    /// At most this many responses wait for the daemon.
    static let responseLimit = 64
    /// At most this many notifications on screen are remembered (a server that keeps them never closes them).
    static let shownLimit = 256

    private let socketPath: String
    private let callTimeout: Duration
    private var desktop: DesktopNotifications!  // set at the start of run()
    private var events: [DesktopNotifications.Event] = []

    /// The Presentations stream, while connected.
    private var stream: VarlinkClient?
    /// The connection Respond calls go over (the stream's is busy with its call).
    private var responder: VarlinkClient?
    private var daemonBackoff = Backoff(first: .milliseconds(250), last: .seconds(30))
    private var nextDaemonTry = ContinuousClock.now
    private var lastDaemonProblem: String?

    /// The server's capabilities, asked once per server.
    private var capabilities: Set<String>?
    private var queue: [Presentation] = []
    private var desktopBackoff = Backoff(first: .seconds(1), last: .seconds(60))
    private var nextDesktopTry = ContinuousClock.now
    private var lastDesktopProblem: String?

    private var responses: [Response] = []
    private var responseBackoff = Backoff(first: .milliseconds(250), last: .seconds(30))
    private var nextResponseTry = ContinuousClock.now

    /// The notifications of ours on screen, by the server's id, and which id each slot holds.
    private var shown: [UInt32: Shown] = [:]
    private var slots: [Presentation.Slot: UInt32] = [:]
    private var shownCount: UInt64 = 0

    private struct Shown {
        var app: String
        var id: String
        var slot: Presentation.Slot
        var order: UInt64
        /// The user chose an action: closing it afterwards is no dismissal.
        var answered = false
    }

    private struct Response {
        var app: String
        var id: String
        var action: String
    }

    init(socketPath: String, callTimeout: Duration) {
        self.socketPath = socketPath
        self.callTimeout = callTimeout
    }

    /// Runs until SIGTERM or SIGINT (returns 0) or until the session bus is lost (returns 1).
    func run() -> Int32 {
        StopSignals.ignoreBrokenPipes()
        let signals: CInt
        do throws(SystemdError) {
            signals = try StopSignals.watch()
        } catch {
            Log.problem("cannot watch for SIGTERM: \(error.reason)")
            return 1
        }

        do {
            self.desktop = try DesktopNotifications(callTimeout: self.callTimeout) { [unowned self] event in
                // Handled once process() returns: the handlers make calls of their own on the bus.
                self.events.append(event)
            }
        } catch {
            Log.problem("\(error)")
            return 1
        }
        if self.desktop.serverOwner == nil {
            Log.problem("no notification server runs on the session bus yet; presentations wait for one")
        }

        while true {
            let now = ContinuousClock.now
            if self.stream == nil, now >= self.nextDaemonTry { self.connectDaemon() }
            if !self.responses.isEmpty, now >= self.nextResponseTry { self.sendResponses() }
            if !self.queue.isEmpty, now >= self.nextDesktopTry { self.showQueued() }
            // Signals that came during a call wait in sd-bus's queue, not on the socket: dispatched here, before the
            // poll, and again for those that came during the calls their handling made.
            while true {
                let dispatched: Bool
                do {
                    dispatched = try self.desktop.process()
                } catch {
                    Log.problem("lost the session bus (\(error)); exiting")
                    return 1
                }
                self.handleEvents()
                if !dispatched { break }
            }

            var descriptors: [(descriptor: CInt, events: Poll.Events)] = [
                (signals, .readable),
                (self.desktop.fileDescriptor, Poll.Events(rawValue: self.desktop.pollEvents)),
            ]
            if let stream = self.stream { descriptors.append((stream.descriptor, .readable)) }
            let timeout = self.pollTimeout()
            let reported: [Poll.Events]
            do throws(SystemdError) {
                reported = try Poll.wait(descriptors, timeout: timeout < 0 ? nil : .milliseconds(timeout))
            } catch {
                if error.errno == Errno.EINTR { continue }
                Log.problem("poll failed: \(error.reason)")
                return 1
            }
            if !reported[0].isEmpty { return 0 }
            if reported.count > 2, !reported[2].isEmpty { self.readStream() }
        }
    }

    /// Milliseconds until the soonest of: the bus's own deadline, the next try at the daemon, the desktop and the
    /// responses; -1 when only a descriptor can bring work.
    private func pollTimeout() -> Int32 {
        let now = ContinuousClock.now
        var waits: [Duration] = []
        if let bus = self.desktop.pollTimeout { waits.append(bus) }
        if self.stream == nil { waits.append(self.nextDaemonTry - now) }
        if !self.queue.isEmpty { waits.append(self.nextDesktopTry - now) }
        if !self.responses.isEmpty { waits.append(self.nextResponseTry - now) }
        guard let soonest = waits.min() else { return -1 }
        guard soonest > .zero else { return 0 }
        let (seconds, attoseconds) = soonest.components
        // Rounded up: a wake before the deadline would find nothing due and spin.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    // MARK: The daemon

    private func connectDaemon() {
        do {
            let client = try VarlinkClient(path: self.socketPath)
            client.setReceiveTimeout(self.callTimeout)
            try client.send(VarlinkCall(method: "io.coalesced.Notifications.Presentations", more: true))
            let first = try client.receiveReply()
            if let error = first.error { throw VarlinkError(name: error, parameters: first.parameters) }
            guard first.continues else { throw AgentError("the daemon ended the Presentations stream at once") }
            self.stream = client
            self.daemonBackoff.reset()
            self.lastDaemonProblem = nil
            Log.note("listening for presentations of the daemon at \(self.socketPath)")
            // The first reply carries none, but a presentation made as the stream opened may come first.
            self.take(first)
            // What came with the first reply in the same read waits in the client's buffer, where no poll of the
            // socket would ever see it.
            if client.hasPendingInput { self.readStream() }
            if !self.responses.isEmpty { self.sendResponses() }
        } catch {
            self.daemonFailed(self.describeDaemonProblem(error))
        }
    }

    private func readStream() {
        guard let stream = self.stream else { return }
        do {
            repeat {
                let reply = try stream.receiveReply()
                if let error = reply.error { throw VarlinkError(name: error, parameters: reply.parameters) }
                self.take(reply)
                guard reply.continues else { throw AgentError("the daemon ended the Presentations stream") }
            } while stream.hasPendingInput
        } catch {
            self.stream = nil
            self.daemonFailed("lost the daemon at \(self.socketPath) (\(error)); reconnecting")
        }
    }

    /// The presentation a reply of the stream carries, if any, on its way to the desktop.
    private func take(_ reply: VarlinkReply) {
        guard let object = reply.parameters["presentation"]?.objectValue else { return }
        if let presentation = Presentation(object) {
            self.enqueue(presentation)
        } else {
            Log.problem("the daemon sent a presentation without app, id or title, ignoring: \(object)")
        }
    }

    private func daemonFailed(_ problem: String) {
        if problem != self.lastDaemonProblem { Log.problem(problem) }
        self.lastDaemonProblem = problem
        self.nextDaemonTry = ContinuousClock.now + self.daemonBackoff.next()
    }

    private func describeDaemonProblem(_ error: any Error) -> String {
        if let error = error as? VarlinkError,
            ["org.varlink.service.MethodNotFound", "org.varlink.service.InterfaceNotFound"].contains(error.varlinkName)
        {
            return "the daemon at \(self.socketPath) has no io.coalesced.Notifications.Presentations (\(error)); "
                + "upgrade coalesced; trying again"
        }
        if let error = error as? VarlinkError, error == .permissionDenied {
            return "the daemon at \(self.socketPath) refused the Presentations stream (\(error)); trying again"
        }
        return "cannot reach the daemon at \(self.socketPath) (\(error)); is coalesced running? Trying again"
    }

    // MARK: The desktop

    private func enqueue(_ presentation: Presentation) {
        if self.queue.count >= Self.queueLimit {
            let dropped = self.queue.removeFirst()
            Log.problem(
                "\(Self.queueLimit) presentations wait for the notification server; dropped the oldest, "
                    + "\(dropped.app) \(dropped.id)"
            )
        }
        self.queue.append(presentation)
        // A presentation waits only behind a desktop that failed; otherwise it goes out now.
        if self.lastDesktopProblem == nil { self.showQueued() }
    }

    private func showQueued() {
        while let presentation = self.queue.first {
            do {
                try self.show(presentation)
                self.queue.removeFirst()
                self.desktopBackoff.reset()
                if self.lastDesktopProblem != nil { Log.note("the notification server takes presentations again") }
                self.lastDesktopProblem = nil
            } catch {
                // One line per problem, not one per try.
                let problem = "\(error)"
                if problem != self.lastDesktopProblem { Log.problem("\(problem); \(self.queue.count) presentation(s) wait") }
                self.lastDesktopProblem = problem
                self.capabilities = nil
                self.nextDesktopTry = ContinuousClock.now + self.desktopBackoff.next()
                return
            }
        }
    }

    private func show(_ presentation: Presentation) throws(SystemdError) {
        let capabilities: Set<String>
        if let known = self.capabilities {
            capabilities = known
        } else {
            capabilities = Set(try self.desktop.capabilities())
            self.capabilities = capabilities
        }
        var actions: [(key: String, label: String)] = []
        if capabilities.contains("actions") {
            actions = [("default", "Open")] + presentation.actions.map { ($0.id, $0.title) }
        }
        var hints: [String: DesktopNotifications.HintValue] = [
            "urgency": .byte(presentation.style == "alert" ? 2 : 1),
            "x-coalesced-app": .string(presentation.app),
            "x-coalesced-id": .string(presentation.id),
        ]
        if let category = presentation.categoryId { hints["x-coalesced-category"] = .string(category) }
        if let sound = presentation.sound {
            hints["sound-name"] = .string(sound)
        } else {
            hints["suppress-sound"] = .boolean(true)
        }
        let slot = presentation.slot(perThread: !capabilities.contains("persistence"))
        let replaces = self.slots[slot] ?? 0
        let id = try self.desktop.notify(
            appName: presentation.app,
            replacesID: replaces,
            summary: presentation.title,
            body: presentation.desktopBody,
            actions: actions,
            hints: hints
        )
        if replaces != 0, replaces != id { self.shown[replaces] = nil }
        if let previous = self.shown[id], previous.slot != slot { self.slots[previous.slot] = nil }
        self.shownCount += 1
        self.shown[id] = Shown(app: presentation.app, id: presentation.id, slot: slot, order: self.shownCount)
        self.slots[slot] = id
        if self.shown.count > Self.shownLimit, let oldest = self.shown.min(by: { $0.value.order < $1.value.order }) {
            self.forget(oldest.key)
        }
    }

    private func forget(_ id: UInt32) {
        guard let entry = self.shown.removeValue(forKey: id) else { return }
        if self.slots[entry.slot] == id { self.slots[entry.slot] = nil }
    }

    private func handleEvents() {
        while !self.events.isEmpty {
            let event = self.events.removeFirst()
            switch event {
            case .actionInvoked(let id, let key):
                guard let entry = self.shown[id] else { continue }
                self.shown[id]?.answered = true
                self.respond(Response(app: entry.app, id: entry.id, action: key))
            case .closed(let id, let reason):
                guard let entry = self.shown[id] else { continue }
                self.forget(id)
                if reason == .dismissed, !entry.answered {
                    self.respond(Response(app: entry.app, id: entry.id, action: "dismiss"))
                }
            case .serverAppeared:
                // A new server knows none of the ids of the last one.
                self.shown.removeAll()
                self.slots.removeAll()
                self.capabilities = nil
                self.desktopBackoff.reset()
                self.nextDesktopTry = ContinuousClock.now
                if !self.queue.isEmpty { self.showQueued() }
            case .serverVanished:
                self.shown.removeAll()
                self.slots.removeAll()
                self.capabilities = nil
            }
        }
    }

    // MARK: Responses

    private func respond(_ response: Response) {
        if self.responses.count >= Self.responseLimit {
            let dropped = self.responses.removeFirst()
            Log.problem(
                "\(Self.responseLimit) responses wait for the daemon; dropped the oldest, \(dropped.action) to "
                    + "\(dropped.app) \(dropped.id)"
            )
        }
        self.responses.append(response)
        if self.responses.count == 1 || ContinuousClock.now >= self.nextResponseTry { self.sendResponses() }
    }

    private func sendResponses() {
        var freshTried = false
        while let response = self.responses.first {
            let reused = self.responder != nil
            do {
                let client: VarlinkClient
                if let responder = self.responder {
                    client = responder
                } else {
                    client = try VarlinkClient(path: self.socketPath)
                    client.setReceiveTimeout(self.callTimeout)
                    self.responder = client
                }
                _ = try client.call(
                    "io.coalesced.Notifications.Respond",
                    AlertResponseForm(id: response.id, action: response.action).respond(app: response.app)
                )
                self.responses.removeFirst()
                self.responseBackoff.reset()
            } catch let error as VarlinkError {
                // The daemon's answer is final: the notification or the action is not its to take.
                Log.problem("the daemon refused \(response.action) to \(response.app) \(response.id): \(error)")
                self.responses.removeFirst()
            } catch {
                self.responder = nil
                // A connection kept from before a daemon restart fails once; a fresh one is tried at once.
                if reused, !freshTried {
                    freshTried = true
                    continue
                }
                Log.problem(
                    "cannot give the daemon \(response.action) to \(response.app) \(response.id) (\(error)); "
                        + "\(self.responses.count) response(s) wait"
                )
                self.nextResponseTry = ContinuousClock.now + self.responseBackoff.next()
                return
            }
        }
    }
}

struct AgentError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One line on stderr each: the journal under systemd.
enum Log {
    /// Something went wrong, and what the agent does about it.
    static func problem(_ text: String) { self.line(text) }
    /// A change for the better, worth a line in the journal.
    static func note(_ text: String) { self.line(text) }

    private static func line(_ text: String) {
        StderrSink.writeLine("coalesce-notify-agent: \(text)")
    }
}
