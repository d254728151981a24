import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Crash-loop protection with real processes: the example app that never acknowledges didFinishLaunching is killed
/// at its deadline three times in a row; then the daemon says in the journal that it launches the app no more by
/// itself, Open is refused with LaunchesHeld, Explain says why, and an operator's Launch lets it be launched again.
@Suite struct CrashLoopTests {
    static let mail = "org.example.mail"

    @Test func anAppKilledThreeTimesInARowDuringItsLaunchIsNoLongerLaunchedByTheDaemon() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1s\nLaunchTimeoutSec=30s\n")
        defer { daemon.signal(SIGKILL) }
        try await onThread {
            try daemon.waitUntilReady()
            let system = try testClient(daemon.socketPath)
            _ = try system.call("io.coalesced.App.Register", ["name": .string(Self.mail), "urlSchemes": ["mailto"]])
            for round in 1...3 {
                let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail, arguments: ["--stall-on", "didFinishLaunching"])
                try app.waitForLine("stalling")
                #expect(app.child.wait(timeout: .seconds(20)) != nil, "round \(round): killed at its deadline")
                try waitForApp(system, Self.mail, "state", "notRunning")
            }
            try waitUntil("the journal entry saying launches are held") {
                daemon.output.contains("its last 3 launches ended before it finished launching")
            }
            #expect(throws: VarlinkError(name: "io.coalesced.App.LaunchesHeld", parameters: ["app": .string(Self.mail), "failed": 3])) {
                try system.call("io.coalesced.App.Open", ["url": "mailto:ann@example.org"])
            }
            let explained = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "explain", Self.mail])
            #expect(explained.stdout.contains("Its last 3 launches ended before it finished launching"), "\(explained.stdout)")

            // The operator launches it; this time it finishes launching, with the reason in its launch options.
            let launch = try ChildProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "launch", Self.mail])
            try waitUntil("the operator's Launch to wait for the app") {
                daemon.output.contains("\(Self.mail): no longer held back")
            }
            let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
            defer { app.kill() }
            let launched = try app.waitForLine("callback didFinishLaunching")
            #expect(launched.contains("reason=user"), "\(launched)")
            #expect(launch.wait(timeout: .seconds(30)) == 0)
            let opened = try system.call("io.coalesced.App.Open", ["url": "mailto:ann@example.org"])
            #expect(opened["app"] == .string(Self.mail))
        }
    }
}
