import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Deadlines switched off on the real daemon, by the configuration (`infinity`) or for development
/// (`coalesced --no-deadlines`): an app that never acknowledges its launch is not killed. What shows that time has
/// passed is the daemon's own clock: it closes a connection left with an unfinished message after
/// `IncompleteMessageTimeoutSec=`, set longer than the acknowledgement deadline the configuration would give.
@Suite struct NoDeadlineTests {
    static let mail = "org.example.mail"

    /// Returns once the daemon has closed a connection left with an unfinished message: `IncompleteMessageTimeoutSec=`
    /// has passed since the call.
    static func waitOutIncompleteMessageTimeout(_ daemon: DaemonProcess) throws {
        let idle = try testClient(daemon.socketPath)
        try idle.sendRaw(Array(#"{"method":"#.utf8))
        #expect(idle.waitForClose(timeout: .seconds(20)), "the daemon closed the unfinished message's connection")
    }

    /// Starts an app that never acknowledges didFinishLaunching, waits out more than a second, and checks that it
    /// still runs; returns it, running as long as the caller holds it.
    static func expectStalledAppSurvives(_ daemon: DaemonProcess) throws -> ExampleApp {
        let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail, arguments: ["--stall-on", "didFinishLaunching"])
        try app.waitForLine("stalling")
        try self.waitOutIncompleteMessageTimeout(daemon)
        #expect(app.child.wait(timeout: .zero) == nil, "the app's process still runs")
        let state = try appInfo(try testClient(daemon.socketPath), Self.mail)["state"]?.stringValue
        #expect(state == "active", "not killed: \(state ?? "-")")
        #expect(!daemon.output.contains("not acknowledged within"))
        return app
    }

    @Test func anAppThatNeverAcknowledgesItsLaunchIsNotKilledUnderInfinity() async throws {
        // The later assignment wins: without it the app would be killed after one second.
        let daemon = try DaemonProcess(
            configuration: "[Apps]\nAcknowledgeTimeoutSec=1s\nAcknowledgeTimeoutSec=infinity\n[Varlink]\nIncompleteMessageTimeoutSec=2s\n"
        )
        try await onThread { try daemon.waitUntilReady() }
        let app = try await onThread { try Self.expectStalledAppSurvives(daemon) }
        try await onThread {
            let limits = try testClient(daemon.socketPath).call("io.coalesced.System.Stats")["stats"]?["limits"]
            #expect(limits?["acknowledgeTimeoutSec"] == .null, "Stats says infinity as null")
            #expect(limits?["launchTimeoutSec"]?.doubleValue == 10)
            #expect(app.child.wait(timeout: .zero) == nil)
        }
        daemon.signal(SIGKILL)
    }

    @Test func noDeadlinesOverridesTheConfigurationAtStartAndReloadAndSaysSo() async throws {
        let daemon = try DaemonProcess(
            configuration: "[Apps]\nAcknowledgeTimeoutSec=1s\nBackgroundTaskBudgetSec=1s\nLaunchTimeoutSec=1s\n"
                + "[Varlink]\nIncompleteMessageTimeoutSec=2s\n",
            arguments: ["--no-deadlines"]
        )
        try await onThread { try daemon.waitUntilReady() }
        #expect(daemon.output.contains("DEADLINES ARE OFF (--no-deadlines)"), "\(daemon.output)")
        let app = try await onThread { try Self.expectStalledAppSurvives(daemon) }

        // A reload reads the files again, and the switch still holds.
        daemon.signal(SIGHUP)
        let socket = daemon.socketPath
        try await onThread {
            let watcher = try testClient(socket)
            try waitUntil("the reload") { try watcher.call("io.coalesced.System.Stats")["stats"]?["reloads"] == 1 }
        }
        try await onThread {
            let system = try testClient(daemon.socketPath)
            let limits = try system.call("io.coalesced.System.Stats")["stats"]?["limits"]
            #expect(limits?["acknowledgeTimeoutSec"] == .null)
            #expect(limits?["backgroundTaskBudgetSec"] == .null)
            #expect(limits?["launchTimeoutSec"] == .null)
            let task = try system.call("io.coalesced.App.BeginBackgroundTask", ["app": .string(Self.mail), "name": "upload"])
            #expect(JSONValue.object(task).jsonText == #"{"id":1}"#, "no budget: no remainingSec")

        }
        let status = try await onThread { try runProcess(BuildProducts.path(of: "coalescectl"), ["status", "--socket", daemon.socketPath]) }
        #expect(status.stdout.contains("Deadlines: acknowledge infinity, background tasks infinity, launch infinity"), "\(status.stdout)")
        try await onThread { #expect(app.child.wait(timeout: .zero) == nil) }
        daemon.signal(SIGKILL)
    }
}
