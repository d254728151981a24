import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Real suspension through SIGSTOP (DESIGN.md §5): the daemon, the example app as real processes, and the kernel's
/// own account of each process's state (/proc/PID/stat). An app without a launch unit is stopped a short delay
/// after it is suspended, continued when it wakes, and wakes into exactly what a cooperative app wakes into. The
/// other suspension cases (nothing stopped while unacknowledged, a stopped app across a restart) run in process
/// (`CoalesceServerTests`: `InProcessSuspensionTests`, `InProcessRestartTests`).
@Suite struct SuspensionTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"
    static let configuration = "[Apps]\nSuspensionDelaySec=100ms\n"

    /// The process's state letter from /proc/PID/stat (`T` when stopped by a signal); `nil` once it is gone.
    static func processState(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(end, offsetBy: 2)...].first
    }

    static func waitForState(_ app: ExampleApp, stopped: Bool) throws {
        let pid = app.child.pid
        try waitUntil("pid \(pid) of \(app.name) to be \(stopped ? "stopped" : "running") (it is \(Self.processState(pid).map(String.init) ?? "gone"))") {
            (Self.processState(pid) == "T") == stopped
        }
    }

    /// Home, until suspended: the two callbacks, then the state.
    static func sendHome(_ app: ExampleApp, _ system: VarlinkClient) throws {
        _ = try system.call("io.coalesced.System.Deactivate", ["app": .string(app.name)])
        #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
        try waitForApp(system, app.name, "state", "suspended")
    }

    /// Three posts of two kinds while the app is suspended: a sum and a latest.
    static func postWhileSuspended(_ system: VarlinkClient, to app: String) throws {
        #expect(try post(system, app, "mail.unread", ["n": 2], policy: ["policy": "sum", "field": "n"]) == false)
        #expect(try post(system, app, "mail.subject", ["s": "first"]) == false)
        #expect(try post(system, app, "mail.unread", ["n": 3]) == false)
        #expect(try post(system, app, "mail.subject", ["s": "last"]) == false)
    }

    @Test func aSuspendedAppIsStoppedAndWakesIntoWhatACooperativeOneWakesInto() async throws {
        let daemon = try DaemonProcess(configuration: Self.configuration)
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let system = try testClient(daemon.socketPath)
            // maps asks to be left running; its example app registers without a mode, which keeps this one.
            _ = try system.call("io.coalesced.App.Register", ["name": .string(Self.maps), "suspension": "cooperative"])
            let maps = try ExampleApp(socket: daemon.socketPath, name: Self.maps)
            #expect(try maps.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try Self.sendHome(maps, system)
            #expect(try appInfo(system, Self.maps)["suspension"] == "cooperative")

            let mail = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
            #expect(try mail.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(Self.processState(mail.child.pid) != "T")
            try Self.sendHome(mail, system)
            try Self.waitForState(mail, stopped: true)
            #expect(try appInfo(system, Self.mail)["suspendedAs"] == "stopped")
            // Suspended longer than mail, and never stopped.
            #expect(Self.processState(maps.child.pid) != "T")
            #expect(try appInfo(system, Self.maps)["suspendedAs"] == nil)

            try Self.postWhileSuspended(system, to: Self.mail)
            try Self.postWhileSuspended(system, to: Self.maps)
            // Each app's wake is read whole (its callbacks, then what it held) before the next app is brought
            // forward: bringing maps forward sends mail back, and what mail had not yet been sent would be held again.
            var woken: [[String]] = []
            for app in [mail, maps] {
                _ = try system.call("io.coalesced.System.Activate", ["app": .string(app.name)])
                #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
                #expect(Self.processState(app.child.pid) != "T")
                #expect(try appInfo(system, app.name)["suspendedAs"] == nil)
                woken.append(try app.events(atLeast: 2))
            }
            #expect(woken[0] == [#"event mail.unread count=2 payload={"n":5}"#, #"event mail.subject count=2 payload={"s":"last"}"#])
            #expect(woken[1] == woken[0])

            // maps brought forward sent mail to the background (ExclusiveForeground=): stopped again.
            #expect(try mail.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try Self.waitForState(mail, stopped: true)
            // `coalescectl apps` shows how a suspended app is held.
            let ctl = BuildProducts.path(of: "coalescectl")
            let listed = try runProcess(ctl, ["--socket", daemon.socketPath, "apps"]).stdout.split(separator: "\n")
            #expect(listed.contains { $0.contains(Self.mail) && $0.contains("suspended (stopped)") })
            let shown = try runProcess(ctl, ["--socket", daemon.socketPath, "app", Self.maps]).stdout.split(separator: "\n")
            #expect(shown.contains { $0.contains("Suspension:") && $0.contains("cooperative") })

            // A purge kills it as it is, stopped: no process is left.
            _ = try system.call("io.coalesced.System.Purge", ["app": .string(Self.mail)])
            #expect(mail.child.wait(timeout: .seconds(10)) != nil)
            #expect(Self.processState(mail.child.pid) == nil)
            #expect(try appInfo(system, Self.mail)["state"] == "notRunning")
            maps.kill()
        }
        #expect(daemon.output.contains("\(Self.mail): stopped (SIGSTOP) while suspended"))
        #expect(daemon.output.contains("\(Self.mail): continued (SIGCONT)"))
        daemon.signal(SIGKILL)
    }

}
