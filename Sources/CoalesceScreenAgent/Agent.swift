import CoalesceCore
import Systemd
import Varlink

/// The agent's one thread: it follows the session's windows and reports each change to the daemon
/// (`io.coalesced.Screen.ReportWindows`), whole, so that a report the daemon missed is made good by the next.
///
/// The daemon may be away (restarting): the windows as they are then go to it once it is back, and again whenever
/// its connection is new, since a daemon that restarted has forgotten them.
///
/// A second connection takes the daemon's focus requests (`io.coalesced.Screen.FocusRequests`): an operator's
/// `coalescectl activate APP --scene ID` becomes a focus asked of the window system, whose answer comes back as
/// the next report.
final class Agent {
    private let socketPath: String
    private let callTimeout: Duration
    private let windows: any WindowSource

    private var daemon: VarlinkClient?
    /// The stream of focus requests, while the daemon keeps it.
    private var requests: VarlinkClient?
    /// The windows as they are now, and as the daemon last took them (`nil`: not since its connection is new).
    private var current: [SessionWindow] = []
    private var reported: [SessionWindow]?
    private var backoff = Backoff(first: .milliseconds(250), last: .seconds(30))
    private var nextTry = ContinuousClock.now
    private var lastProblem: String?
    /// Windows logged as claiming an app their process is not: one line each.
    private var loggedClaims: Set<String> = []

    init(socketPath: String, callTimeout: Duration, windows: any WindowSource) {
        self.socketPath = socketPath
        self.callTimeout = callTimeout
        self.windows = windows
    }

    /// Runs until SIGTERM or SIGINT, or the session's end (returns 0), or until the window system is lost (1).
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
            self.current = try self.windows.windows()
        } catch {
            Log.problem("cannot read the session's windows: \(error)")
            return 1
        }
        Log.note("following the \(self.windows.source) session's windows (\(self.current.count) now) for the daemon at \(self.socketPath)")
        while true {
            if self.reported != self.current, ContinuousClock.now >= self.nextTry { self.report() }
            var descriptors: [(descriptor: CInt, events: Poll.Events)] = [
                (signals, .readable), (self.windows.descriptor, .readable),
            ]
            var daemonIndex: Int?
            var requestsIndex: Int?
            if let daemon = self.daemon {
                daemonIndex = descriptors.count
                descriptors.append((daemon.descriptor, .readable))
            }
            if let requests = self.requests {
                requestsIndex = descriptors.count
                descriptors.append((requests.descriptor, .readable))
            }
            let reported: [Poll.Events]
            do throws(SystemdError) {
                reported = try Poll.wait(descriptors, timeout: self.pollTimeout())
            } catch {
                if error.errno == Errno.EINTR { continue }
                Log.problem("poll failed: \(error.reason)")
                return 1
            }
            if !reported[0].isEmpty { return 0 }
            var news = WindowNews.nothing
            do {
                if !reported[1].isEmpty {
                    news = try self.windows.read()
                } else if let deadline = self.windows.deadline, ContinuousClock.now >= deadline {
                    news = self.windows.deadlinePassed()
                }
                switch news {
                case .nothing: break
                case .changed: self.current = try self.windows.windows()
                case .ended(let why):
                    Log.note("\(why): the session's windows are gone")
                    self.current = []
                    self.report()
                    return 0
                }
            } catch {
                Log.problem("lost the \(self.windows.source) session (\(error)); exiting")
                self.current = []
                self.report()
                return 1
            }
            // A connection with no call outstanding reads only when the daemon has closed it.
            if let daemonIndex, !reported[daemonIndex].isEmpty {
                self.dropDaemon("the daemon at \(self.socketPath) closed the connection")
            } else if let requestsIndex, !reported[requestsIndex].isEmpty {
                self.takeRequests()
            }
        }
    }

    /// Until the next try at the daemon, or the source's deadline; `nil` when only a descriptor can bring work.
    private func pollTimeout() -> Duration? {
        var waits: [Duration] = []
        let now = ContinuousClock.now
        if self.reported != self.current { waits.append(self.nextTry - now) }
        if let deadline = self.windows.deadline { waits.append(deadline - now) }
        return waits.min().map { max($0, .zero) }
    }

    // MARK: The daemon

    private func report() {
        do {
            let daemon = try self.daemon ?? self.connect()
            let reply = try daemon.call(
                "io.coalesced.Screen.ReportWindows",
                ["source": .string(self.windows.source), "windows": .array(self.current.map(\.wire))]
            )
            self.reported = self.current
            self.backoff.reset()
            if self.lastProblem != nil { Log.note("the daemon at \(self.socketPath) takes the session's windows again") }
            self.lastProblem = nil
            self.logClaims(reply["windows"]?.arrayValue ?? [])
        } catch let error as VarlinkError where error.varlinkName.hasPrefix("io.coalesced.Screen.") {
            // The daemon read the report and refused it: trying the same again would be refused again.
            Log.problem("the daemon refused the session's windows: \(error)")
            self.reported = self.current
        } catch {
            self.dropDaemon(self.describe(error))
        }
    }

    private func connect() throws -> VarlinkClient {
        let client = try VarlinkClient(path: self.socketPath)
        client.setReceiveTimeout(self.callTimeout)
        let requests = try VarlinkClient(path: self.socketPath)
        requests.setReceiveTimeout(self.callTimeout)
        try requests.send(
            VarlinkCall(method: "io.coalesced.Screen.FocusRequests", parameters: ["source": .string(self.windows.source)], more: true)
        )
        self.daemon = client
        self.requests = requests
        self.reported = nil
        return client
    }

    /// Reads the focus requests that came, and asks the window system for each.
    private func takeRequests() {
        guard let requests = self.requests else { return }
        do {
            repeat {
                let reply = try requests.receiveReply()
                if let error = reply.error {
                    // A daemon without the method still takes reports: follow on without its requests.
                    Log.problem("the daemon at \(self.socketPath) sends no focus requests (\(error)): scenes cannot be focused from it")
                    self.requests = nil
                    return
                }
                if let window = reply.parameters["window"]?.stringValue {
                    self.focus(window)
                } else {
                    Log.note("the daemon at \(self.socketPath) may ask this session to focus its windows")
                }
                if !reply.continues {
                    self.requests = nil
                    return
                }
            } while requests.hasPendingInput
        } catch {
            self.dropDaemon(self.describe(error))
        }
    }

    private func focus(_ window: String) {
        do {
            if try self.windows.focus(window) {
                Log.note("asked the \(self.windows.source) session to focus window \(window), as the daemon asked")
            } else {
                Log.problem("the daemon asked to focus window \(window), which the session does not show")
            }
        } catch {
            Log.problem("cannot focus window \(window): \(error)")
        }
    }

    private func dropDaemon(_ problem: String) {
        self.daemon = nil
        self.requests = nil
        self.reported = nil
        if problem != self.lastProblem { Log.problem(problem) }
        self.lastProblem = problem
        self.nextTry = ContinuousClock.now + self.backoff.next()
    }

    private func describe(_ error: any Error) -> String {
        if let error = error as? VarlinkError,
            ["org.varlink.service.MethodNotFound", "org.varlink.service.InterfaceNotFound"].contains(error.varlinkName)
        {
            return "the daemon at \(self.socketPath) has no io.coalesced.Screen (\(error)); upgrade coalesced; trying again"
        }
        return "cannot reach the daemon at \(self.socketPath) (\(error)); is coalesced running? Trying again"
    }

    /// A window that names an app its process is not is worth a line: it may be one app posing as another.
    private func logClaims(_ matches: [JSONValue]) {
        for (window, match) in zip(self.current, matches) where match["refused"] == "notTheAppsProcess" {
            guard self.loggedClaims.insert(window.id).inserted else { continue }
            Log.problem(
                "window \(window.id) (\"\(window.title)\") names the app \(window.appID), but its process "
                    + "\(window.pid.map(String.init) ?? "-") is not the app's: it is no scene of it"
            )
        }
        self.loggedClaims.formIntersection(self.current.map(\.id))
    }
}

/// One line on stderr each: the journal under systemd.
enum Log {
    /// Something went wrong, and what the agent does about it.
    static func problem(_ text: String) { self.line(text) }
    /// A change worth a line in the journal.
    static func note(_ text: String) { self.line(text) }

    private static func line(_ text: String) {
        StderrSink.writeLine("coalesce-screen-agent: \(text)")
    }
}
