import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The lifecycle end to end: the real daemon, the example app built on CoalesceClient as a separate process, and
/// the System interface over the real socket. Kept here: restarts of the daemon (kill -9, SIGTERM) that real app
/// processes outlive and reconnect through the client library, and the errors as the wire carries them (the
/// interfaces' own parameter checks included). The transition table's cases run in process, on a manual clock
/// (`CoalesceServerTests`: `InProcessLifecycleTests`, `InProcessDeadlineTests`, `InProcessRestartTests`).
@Suite struct LifecycleTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// Two running apps for a restart to take up: mail launched, then sent home until suspended; maps launched and
    /// active. It blocks: call it off the test's task.
    static func mailSuspendedAndMapsActive(_ socket: String) throws -> (mail: ExampleApp, maps: ExampleApp) {
        let system = try testClient(socket)
        let mail = try ExampleApp(socket: socket, name: Self.mail)
        #expect(try mail.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        _ = try system.call("io.coalesced.System.Deactivate")
        #expect(try mail.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
        let maps = try ExampleApp(socket: socket, name: Self.maps)
        #expect(try maps.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
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
        try await onThread { maps.kill() }  // ends while no daemon runs
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
        #expect(try await onThread { first.waitForExit(timeout: .seconds(1)) } == 0, "a graceful stop exits 0")
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

    @Test func requestsThatDoNotFitTheStateGetClearErrors() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nLaunchTimeoutSec=500ms\nMaxSavedState=16\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
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
}
