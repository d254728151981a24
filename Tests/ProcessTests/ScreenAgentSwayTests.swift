@testable import CoalesceScreenAgent
import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// coalesce-screen-agent in a real sway session (headless sway 1.7) beside the real daemon: windows of real Wayland
/// clients, moved with swaymsg as a person's keys would, drive the scenes of their apps with no operator call.
@Suite struct ScreenAgentSwayTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// The daemon, a sway session and the agent between them, following it through `source` (`nil`: `auto`) with
    /// the session's variables, `SWAYSOCK` only where `swaySocket` says; `body` runs on a thread of its own.
    static func withSession(
        source: String? = "sway",
        swaySocket: Bool = true,
        _ body: @escaping @Sendable (DaemonProcess, SwaySession, WatchedProcess) throws -> Void
    ) async throws {
        try await onThread {
            let daemon = try DaemonProcess()
            try daemon.waitUntilReady()
            let sway = try SwaySession()
            var environment = sway.clientEnvironment
            if swaySocket { environment["SWAYSOCK"] = sway.ipcSocket }
            let agent = try WatchedProcess(
                BuildProducts.path(of: "coalesce-screen-agent"),
                ["--socket", daemon.socketPath] + (source.map { ["--source", $0] } ?? []),
                environment: environment
            )
            try agent.waitForLine(containing: "following the wayland session's windows")
            try body(daemon, sway, agent)
        }
    }

    /// The app's state as the daemon says (`io.coalesced.System.GetApp`), once it is `expected`.
    static func waitForState(_ daemon: DaemonProcess, _ app: String, _ expected: String) throws {
        let client = try VarlinkClient(path: daemon.socketPath)
        try waitUntil("\(app) to be \(expected)") {
            try client.call("io.coalesced.System.GetApp", ["app": .string(app)])["app"]?["state"]?.stringValue == expected
        }
    }

    static func acknowledge(_ daemon: DaemonProcess, _ app: WaylandApp) throws {
        _ = try VarlinkClient(path: daemon.socketPath).call(
            "io.coalesced.App.Ack", ["app": .string(app.name), "seq": .int(app.lastSequence)]
        )
    }

    /// The titles of the session's windows by their ids, as sway's tree has them: scenes are named by the ids.
    static func name(_ app: WaylandApp, in sway: SwaySession) throws {
        let tree = try runProcess("/usr/bin/swaymsg", ["-s", sway.ipcSocket, "-t", "get_tree", "--raw"])
        for window in SwayTree.windows(in: try JSONParser.parse(tree.stdout)) { app.titles[window.id] = window.title }
    }

    @Test func focusHidingAndClosingSwaysWindowsTakeTwoAppsThroughTheirScenes() async throws {
        try await Self.withSession { daemon, sway, _ in
            let registrar = try VarlinkClient(path: daemon.socketPath)
            for app in [Self.mail, Self.maps] { _ = try registrar.call("io.coalesced.App.Register", ["name": .string(app)]) }

            // Mail opens two windows (sway focuses the newest) and attaches: its user opened it.
            let mail = try WaylandApp(sway, socket: daemon.socketPath, app: Self.mail, titles: ["Inbox", "Draft"])
            try Self.waitForState(daemon, Self.mail, "active")
            try Self.name(mail, in: sway)
            let launched = try mail.callbacks(7)
            #expect(Array(launched.prefix(3)) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(Set(launched.dropFirst(3)) == ["Inbox willConnect", "Inbox willEnterForeground", "Draft willConnect", "Draft willEnterForeground"])
            let mailFocused = try mail.callbacks(1)
            #expect(mailFocused == ["Draft didBecomeActive"])
            // The operator sees them, by sway's ids, with their titles.
            let listed = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "--no-legend", "scenes", Self.mail])
            let scenes = listed.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
            #expect(Set(scenes.map { [mail.titles[$0[0]] ?? "?"] + $0.dropFirst() }) == [
                ["Inbox", "foregroundInactive", "wayland", "Inbox"], ["Draft", "foregroundActive", "wayland", "Draft"],
            ], "\(listed.stdout)\(listed.stderr)")

            // Maps opens its window, which takes the focus: mail resigns first.
            let maps = try WaylandApp(sway, socket: daemon.socketPath, app: Self.maps, titles: ["Map"])
            try Self.waitForState(daemon, Self.maps, "active")
            try Self.name(maps, in: sway)
            let mailResigned = try mail.callbacks(2)
            #expect(mailResigned == ["Draft willResignActive", "willResignActive"])
            try Self.waitForState(daemon, Self.mail, "inactive")
            let mapsOpened = try maps.callbacks(6)
            #expect(mapsOpened == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "Map willConnect", "Map willEnterForeground", "Map didBecomeActive"])

            // The user focuses mail's inbox.
            try sway.command(#"[title="^Inbox$"] focus"#)
            let mapsResigned = try maps.callbacks(2)
            #expect(mapsResigned == ["Map willResignActive", "willResignActive"])
            let mailActive = try mail.callbacks(2)
            #expect(mailActive == ["didBecomeActive", "Inbox didBecomeActive"])

            // Maps' window goes to another workspace: maps goes to the background, then is suspended.
            try sway.command(#"[title="^Map$"] move container to workspace 2"#)
            let mapsHidden = try maps.callbacks(2)
            #expect(mapsHidden == ["Map didEnterBackground", "didEnterBackground"])
            try Self.acknowledge(daemon, maps)
            try Self.waitForState(daemon, Self.maps, "suspended")

            // Mail's draft is closed, then its inbox is moved away too.
            try sway.command(#"[title="^Draft$"] kill"#)
            let draftClosed = try mail.callbacks(2)
            #expect(draftClosed == ["Draft didEnterBackground", "Draft didDisconnect"])
            try sway.command(#"[title="^Inbox$"] move container to workspace 3"#)
            let mailHidden = try mail.callbacks(4)
            #expect(mailHidden == ["Inbox willResignActive", "willResignActive", "Inbox didEnterBackground", "didEnterBackground"])
            try Self.acknowledge(daemon, mail)
            try Self.waitForState(daemon, Self.mail, "suspended")
        }
    }

    @Test func aWindowThatNamesAnAppItsProcessIsNotIsNoSceneOfItAndTheAgentSaysSo() async throws {
        try await Self.withSession { daemon, sway, agent in
            _ = try VarlinkClient(path: daemon.socketPath).call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            let mail = try WaylandApp(sway, socket: daemon.socketPath, app: Self.mail, titles: ["Inbox"])
            try Self.waitForState(daemon, Self.mail, "active")
            try Self.name(mail, in: sway)
            let opened = try mail.callbacks(6)
            #expect(opened == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "Inbox willConnect", "Inbox willEnterForeground", "Inbox didBecomeActive"])

            // Another process opens a window with mail's app id: it takes the focus, as any window would, but it is
            // no scene of mail's.
            let impostor = try WaylandApp(sway, socket: "-", app: Self.mail, titles: ["Impostor"])
            let line = try agent.waitForLine(containing: "names the app \(Self.mail), but its process \(impostor.pid) is not the app's")
            #expect(line.contains("Impostor"))
            let resigned = try mail.callbacks(2)
            #expect(resigned == ["Inbox willResignActive", "willResignActive"])
            try Self.waitForState(daemon, Self.mail, "inactive")
            try sway.command(#"[title="^Impostor$"] kill"#)
            let back = try mail.callbacks(2)
            #expect(back == ["didBecomeActive", "Inbox didBecomeActive"], "no callback ever named the impostor's window")
        }
    }
}
