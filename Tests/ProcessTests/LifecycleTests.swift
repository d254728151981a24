import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The transition table of DESIGN.md §1 end to end: the real daemon, the example app built on CoalesceClient as
/// a separate process, and the System interface over the real socket. The callback orders are seed 004's.
@Suite struct LifecycleTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// A daemon with its System client; the apps attach from their own processes. Used from one thread at a time.
    final class Device: @unchecked Sendable {
        let daemon: DaemonProcess
        let system: VarlinkClient

        init(configuration: String = "") async throws {
            self.daemon = try DaemonProcess(configuration: configuration)
            try await onThread { [daemon] in try daemon.waitUntilReady() }
            self.system = try testClient(self.daemon.socketPath)
        }

        func start(_ name: String, _ arguments: [String] = []) throws -> ExampleApp {
            try ExampleApp(socket: self.daemon.socketPath, name: name, arguments: arguments)
        }

        @discardableResult
        func call(_ method: String, _ parameters: JSONObject = [:]) throws -> JSONObject {
            try self.system.call("io.coalesced.System." + method, parameters)
        }

        func state(_ name: String) throws -> String? {
            try self.call("GetApp", ["app": .string(name)])["app"]?["state"]?.stringValue
        }

        /// Starts a `System.Launch` of `name` on a connection of its own, and returns it once the daemon has taken
        /// the call: an app whose process attached before that would be running already, and refuse the Launch.
        func launchTaken(_ name: String, _ parameters: JSONObject = [:]) throws -> BackgroundCall<JSONObject> {
            let before = try self.calls()
            let socket = self.daemon.socketPath
            let launch = BackgroundCall {
                try testClient(socket).call("io.coalesced.System.Launch", parameters.merging(["app": .string(name)]) { _, new in new })
            }
            // The daemon counts each call as it takes it, the Stats calls of this wait included.
            var polls: Int64 = 0
            try waitUntil("the daemon to take the Launch of \(name)") {
                polls += 1
                return try self.calls() - before - polls >= 1
            }
            return launch
        }

        /// How many calls the daemon has taken, this one included.
        func calls() throws -> Int64 {
            try self.call("Stats")["stats"]?["calls"]?.intValue ?? -1
        }
    }

    @Test func theProcessExitingMeansNotRunningAndMonitorsSeeEveryTransition() async throws {
        let device = try await Device()
        let socket = device.daemon.socketPath
        let seen = LockedLines()
        let watching = DispatchSemaphoreBox()
        Thread.detachNewThread {
            do {
                try testClient(socket).callMore("io.coalesced.System.Monitor") { reply in
                    guard let transition = reply["transition"] else { return watching.finish(nil) }
                    seen.append(
                        "\(transition["app"]?.stringValue ?? "?") \(transition["from"]?.stringValue ?? "?")>\(transition["to"]?.stringValue ?? "?") \(transition["reason"]?.stringValue ?? "?")"
                    )
                }
            } catch {
                watching.finish(error)  // never reached the first reply: the wait below fails instead of hanging
            }
        }
        try await onThread {
            #expect(watching.wait() == nil)
            let app = try device.start(Self.mail)
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
            app.child.signal(SIGKILL)
            try waitForApp(device.system, Self.mail, "state", "notRunning")
            try waitUntil("3 transitions on the monitor (\(seen.lines))") { seen.lines.count >= 3 }
            #expect(
                seen.lines == [
                    "org.example.mail notRunning>inactive launch", "org.example.mail inactive>active launch",
                    "org.example.mail active>notRunning processExited",
                ]
            )
        }
    }

    /// Two running apps for a restart to take up: mail launched, then sent home until suspended; maps launched and
    /// active. It blocks: call it off the test's task.
    static func mailSuspendedAndMapsActive(_ socket: String) throws -> (mail: ExampleApp, maps: ExampleApp) {
        let system = try testClient(socket)
        let mail = try ExampleApp(socket: socket, name: Self.mail)
        #expect(try mail.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
        _ = try system.call("io.coalesced.System.Deactivate")
        #expect(try mail.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
        let maps = try ExampleApp(socket: socket, name: Self.maps)
        #expect(try maps.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
        try waitForApp(system, Self.mail, "state", "suspended")
        return (mail, maps)
    }

    /// A restart of the daemon (kill -9) costs running apps nothing: each is taken up in the state it was in, its
    /// process attaches again on its own (the client library reconnects) and hears no launch; an app whose process
    /// ended while the daemon was down is not running.
    @Test func appsKeepTheirStatesAcrossARestartOfTheDaemon() async throws {
        let first = try DaemonProcess(configuration: cooperative)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        let (mail, maps) = try await onThread {
            let apps = try Self.mailSuspendedAndMapsActive(socket)
            // States go to disk with the next commit, or a tenth of a second later: this test is about kill -9, so
            // a commit is made now, instead of waiting for that.
            try commitUnhurriedWrites(testClient(socket))
            return apps
        }
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }
        maps.kill()  // ends while no daemon runs
        let second = try await onThread { try first.restartedWhenReady(configuration: cooperative) }
        try await onThread {
            let system = try testClient(socket)
            #expect(try appInfo(system, Self.maps)["state"] == "notRunning")
            #expect(try appInfo(system, Self.mail)["state"] == "suspended")
            #expect(try appInfo(system, Self.mail)["pid"] == .int(Int64(mail.child.pid)))
            try waitForApp(system, Self.mail, "attached", true)  // the client library attaches again
            #expect(mail.unreadCallbacks.isEmpty, "no launch: the app was running all along")

            // It goes on from where it was.
            _ = try system.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try mail.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(try appInfo(system, Self.mail)["state"] == "active")
        }
        #expect(second.output.contains("suspended as before the restart, waiting for pid \(mail.child.pid) to attach again"))
        #expect(second.output.contains("\(Self.maps): active → notRunning (processExited), while the daemon was not running"))
        second.signal(SIGKILL)
    }

    /// A graceful stop (SIGTERM, as `systemctl restart` sends) leaves the apps as a crash does: a running app keeps
    /// its state, its process attaches again on its own and hears no launch, and the daemon says it left it so.
    @Test func aGracefulStopLeavesRunningAppsInTheirStates() async throws {
        let first = try DaemonProcess(configuration: cooperative)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        let (mail, maps) = try await onThread { try Self.mailSuspendedAndMapsActive(socket) }
        let second = try await onThread { try first.restartedWhenReady(configuration: cooperative, endingWith: SIGTERM) }
        #expect(first.waitForExit(timeout: .seconds(1)) == 0, "a graceful stop exits 0")
        #expect(first.output.contains("Leaving 2 running apps as they are for the next start"), "\(first.output)")
        try await onThread {
            let system = try testClient(socket)
            #expect(try appInfo(system, Self.mail)["state"] == "suspended")
            #expect(try appInfo(system, Self.maps)["state"] == "active")
            #expect(try appInfo(system, Self.maps)["pid"] == .int(Int64(maps.child.pid)))
            try waitForApp(system, Self.mail, "attached", true)  // the client library attaches again
            try waitForApp(system, Self.maps, "attached", true)
            #expect(mail.unreadCallbacks.isEmpty, "no launch: the app was running all along")
            #expect(maps.unreadCallbacks.isEmpty, "no launch: the app was running all along")

            _ = try system.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try maps.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            #expect(try mail.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
        }
        #expect(second.output.contains("\(Self.mail): suspended as before the restart, waiting for pid \(mail.child.pid) to attach again"))
        #expect(!second.output.contains("while the daemon was not running"), "\(second.output)")
        second.signal(SIGKILL)
    }

    /// A daemon killed (`kill -9`) and started again with `configuration` while the app, launched from this test's
    /// own process, runs on: its stream stays open until the first daemon is gone, as an app's process keeps it.
    static func restartedWhileThisProcessRunsTheApp(configuration: String) async throws -> DaemonProcess {
        let first = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try first.waitUntilReady() }
        let stream = try attachedFromThisProcess(first.socketPath, app: Self.mail)
        // Its state on disk before the kill -9: it goes with the next commit, made now.
        try await onThread { try commitUnhurriedWrites(testClient(first.socketPath)) }
        let second = try await onThread { try first.restartedWhenReady(configuration: configuration) }
        withExtendedLifetime(stream) {}
        return second
    }

    /// A process that outlived the daemon but never attaches again stops counting as the app after
    /// `LaunchTimeoutSec=`; one attaching in its place is launched.
    @Test func aProcessThatDoesNotAttachAgainAfterARestartNoLongerCountsAsTheApp() async throws {
        // The app attached from this test's own process, which will not attach again.
        let second = try await Self.restartedWhileThisProcessRunsTheApp(configuration: noDeadlines + "LaunchTimeoutSec=3s\n")
        let socket = second.socketPath
        // Taken up at start-up (said before READY=1; a GetApp now could come after the timeout on a busy machine).
        #expect(second.output.contains("\(Self.mail): active as before the restart, waiting for pid \(getpid()) to attach again"))
        try await onThread {
            let system = try testClient(socket)
            try waitForApp(system, Self.mail, "state", "notRunning")
            let relaunched = try ExampleApp(socket: socket, name: Self.mail)
            #expect(try relaunched.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
        }
        #expect(second.output.contains("did not attach again within 3.0 s of the restart"))
        second.signal(SIGKILL)
    }

    /// What happens to an app while its process has not attached again after a restart (here the home button)
    /// changes its state at once, and its callbacks reach the process when it attaches, after the first reply.
    @Test func callbacksOfAChangeBeforeTheProcessAttachesAgainReachItWhenItDoes() async throws {
        let second = try await Self.restartedWhileThisProcessRunsTheApp(configuration: noDeadlines)
        let socket = second.socketPath
        try await onThread {
            let system = try testClient(socket)
            let home = try system.call("io.coalesced.System.Deactivate", ["app": .string(Self.mail)])
            #expect(home["app"]?["state"] == "background")
            let again = try testClient(socket)
            try again.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(Self.mail)], more: true))
            #expect(try again.receiveReply().parameters["state"] == "background")
            let callbacks = [try again.receiveReply(), try again.receiveReply()].map { $0.parameters["callback"] }
            #expect(callbacks.map { $0?["kind"] } == ["lifecycle.willResignActive", "lifecycle.didEnterBackground"])
            _ = try system.call("io.coalesced.App.Ack", ["app": .string(Self.mail), "seq": callbacks[1]?["seq"] ?? .null])
            try waitForApp(system, Self.mail, "state", "suspended")
        }
        second.signal(SIGKILL)
    }

    @Test func aMonitorThatDoesNotReadIsEndedInsteadOfGrowingTheDaemon() async throws {
        let device = try await Device()
        try await onThread {
            let mail = try device.start(Self.mail)
            let maps = try device.start(Self.maps)
            #expect(try mail.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
            #expect(try maps.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
            let monitor = try testClient(device.daemon.socketPath)
            try monitor.send(VarlinkCall(method: "io.coalesced.System.Monitor", more: true))
            #expect(try monitor.receiveReply().continues)
            // Each Activate is four transitions, about 700 bytes to the monitor, which stops reading: 4,000 of them
            // are more than the socket buffers and the 1 MiB bound together.
            let switches = 4000
            for index in 0..<switches {
                try device.call("Activate", ["app": .string(index % 2 == 0 ? Self.mail : Self.maps)])
            }
            // Now read: the transitions that were sent, then the error that ended the monitor.
            var transitions = 0
            while true {
                let reply = try monitor.receiveReply()
                if let error = reply.error {
                    #expect(error == "io.coalesced.System.MonitorOverrun")
                    #expect(reply.parameters["bound"] == 1_048_576)
                    break
                }
                transitions += 1
            }
            #expect(transitions > 1000 && transitions < switches * 4, "\(transitions) of \(switches * 4)")
            #expect(try device.call("Stats")["stats"]?["apps"] == 2, "still serving")
        }
    }

    @Test func requestsThatDoNotFitTheStateGetClearErrors() async throws {
        let device = try await Device(configuration: "[Apps]\nLaunchTimeoutSec=500ms\nMaxSavedState=16\n")
        let client = device.system
        _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
        #expect(
            throws: VarlinkError(
                name: "io.coalesced.System.WrongState",
                parameters: ["app": "org.example.mail", "state": "notRunning", "reason": "the app is not running (it is notRunning)"]
            )
        ) { try client.call("io.coalesced.System.Activate", ["app": .string(Self.mail)]) }
        #expect(throws: VarlinkError(name: "io.coalesced.System.NoForegroundApp")) {
            try client.call("io.coalesced.System.Deactivate")
        }
        #expect(throws: VarlinkError(name: "io.coalesced.System.NothingToPurge")) { try client.call("io.coalesced.System.Purge") }
        #expect(throws: VarlinkError.invalidParameter("phase", reason: #"expected begin or end, got "sideways""#)) {
            try client.call("io.coalesced.System.Interrupt", ["phase": "sideways"])
        }
        #expect(throws: VarlinkError(name: "io.coalesced.System.LaunchTimedOut", parameters: ["app": "org.example.mail", "timeoutSec": 0.5])) {
            try client.call("io.coalesced.System.Launch", ["app": .string(Self.mail)])
        }
        #expect(throws: VarlinkError(name: "io.coalesced.System.NoSuchApp", parameters: ["app": "org.example.none"])) {
            try client.call("io.coalesced.System.Launch", ["app": "org.example.none"])
        }
        #expect(throws: VarlinkError.expectedMore) { try client.call("io.coalesced.App.Attach", ["app": .string(Self.mail)]) }
        #expect(throws: VarlinkError(name: "io.coalesced.App.NotRegistered", parameters: ["app": "org.example.none"])) {
            try client.call("io.coalesced.App.Ack", ["app": "org.example.none", "seq": 1])
        }
        #expect(
            throws: VarlinkError(
                name: "io.coalesced.App.WrongState",
                parameters: ["app": "org.example.mail", "state": "notRunning", "reason": "the app is not running (it is notRunning)"]
            )
        ) { try client.call("io.coalesced.App.BeginBackgroundTask", ["app": .string(Self.mail), "name": "upload"]) }
        #expect(throws: VarlinkError(name: "io.coalesced.App.NoSuchTask", parameters: ["app": "org.example.mail", "id": 7])) {
            try client.call("io.coalesced.App.EndBackgroundTask", ["app": .string(Self.mail), "id": 7])
        }
        #expect(
            throws: VarlinkError(name: "io.coalesced.App.StateTooLarge", parameters: ["app": "org.example.mail", "size": 17, "limit": 16])
        ) { try client.call("io.coalesced.App.SaveState", ["app": .string(Self.mail), "data": "12345678901234567"]) }
        #expect(throws: VarlinkError.invalidParameter("seq", reason: "must not be negative")) {
            try client.call("io.coalesced.App.Ack", ["app": .string(Self.mail), "seq": -1])
        }
        // Nothing was ever sent to the app: an Ack of any number names the number and the next one it will get.
        for seq: Int64 in [999, 1 << 40] {
            #expect {
                try client.call("io.coalesced.App.Ack", ["app": .string(Self.mail), "seq": .int(seq)])
            } throws: { error in
                guard let error = error as? VarlinkError, error.varlinkName == "io.coalesced.App.SequenceNotSent" else { return false }
                let next = error.varlinkParameters["next"]?.intValue ?? 0
                return error.varlinkParameters["seq"] == .int(seq) && error.varlinkParameters["app"] == .string(Self.mail)
                    && next > 1 << 32 && next < 1 << 40  // the next number of this run, generation 1
            }
        }
        #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 1, "the daemon is still serving")
    }
}

/// Lines collected from another thread.
final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { self.lock.withLock { self.stored.append(line) } }
    var lines: [String] { self.lock.withLock { self.stored } }
}

/// A blocking call made on a thread of its own, while the test goes on; `value()` waits for its result.
final class BackgroundCall<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<T, any Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        Thread.detachNewThread {
            do { self.result = .success(try body()) } catch { self.result = .failure(error) }
            self.done.signal()
        }
    }

    func value() throws -> T {
        self.done.wait()
        self.done.signal()
        return try self.result!.get()
    }
}
