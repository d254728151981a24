@testable import CoalesceScreenAgent
import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// coalesce-screen-agent following a wlroots compositor through wlr-foreign-toplevel-management (`--source wayland`),
/// beside the real daemon: headless sway 1.7 speaks the protocol, as labwc, wayfire and wlroots' kiosk compositors do.
/// What the protocol tells on sway: which window is activated, and which are opened and closed (sway neither minimizes
/// nor tells a window moved to a hidden workspace through it; ScreenAgentSwayTests covers that through sway's IPC).
@Suite struct ScreenAgentWaylandTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// No SWAYSOCK: `auto` takes the Wayland protocol where WAYLAND_DISPLAY is set.
    static func withSession(_ body: @escaping @Sendable (DaemonProcess, SwaySession, WatchedProcess) throws -> Void) async throws {
        try await ScreenAgentSwayTests.withSession(source: nil, swaySocket: false, body)
    }

    @Test func focusAndClosingTheCompositorsWindowsTakeTwoAppsThroughTheirScenes() async throws {
        try await Self.withSession { daemon, sway, _ in
            let registrar = try VarlinkClient(path: daemon.socketPath)
            for app in [Self.mail, Self.maps] { _ = try registrar.call("io.coalesced.App.Register", ["name": .string(app)]) }

            // Mail opens two windows (the compositor activates the newest) and attaches.
            let mail = try WaylandApp(sway, socket: daemon.socketPath, app: Self.mail, titles: ["Inbox", "Draft"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.mail, "active")
            let launched = try mail.callbacks(7)
            #expect(Array(launched.prefix(3)) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(Set(launched.dropFirst(3)) == ["Inbox willConnect", "Inbox willEnterForeground", "Draft willConnect", "Draft willEnterForeground"])
            let mailFocused = try mail.callbacks(1)
            #expect(mailFocused == ["Draft didBecomeActive"])
            let listed = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "--no-legend", "scenes", Self.mail])
            let scenes = listed.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().map(String.init) }
            #expect(Set(scenes) == [["foregroundInactive", "wayland", "Inbox"], ["foregroundActive", "wayland", "Draft"]], "\(listed.stdout)\(listed.stderr)")

            // Maps opens its window, which takes the focus: mail resigns first.
            let maps = try WaylandApp(sway, socket: daemon.socketPath, app: Self.maps, titles: ["Map"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.maps, "active")
            let mailResigned = try mail.callbacks(2)
            #expect(mailResigned == ["Draft willResignActive", "willResignActive"])
            let mapsOpened = try maps.callbacks(6)
            #expect(mapsOpened == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "Map willConnect", "Map willEnterForeground", "Map didBecomeActive"])

            // The user focuses mail's inbox.
            try sway.command(#"[title="^Inbox$"] focus"#)
            let mapsResigned = try maps.callbacks(2)
            #expect(mapsResigned == ["Map willResignActive", "willResignActive"])
            let mailActive = try mail.callbacks(2)
            #expect(mailActive == ["didBecomeActive", "Inbox didBecomeActive"])

            // Maps' only window is closed: its scene disconnects and maps goes to the background, then is suspended.
            try sway.command(#"[title="^Map$"] kill"#)
            let mapsClosed = try maps.callbacks(3)
            #expect(mapsClosed == ["Map didEnterBackground", "didEnterBackground", "Map didDisconnect"])
            try ScreenAgentSwayTests.acknowledge(daemon, maps)
            try ScreenAgentSwayTests.waitForState(daemon, Self.maps, "suspended")
        }
    }

    @Test func whenTheCompositorEndsTheAgentReportsNoWindowsAndExitsCleanly() async throws {
        try await Self.withSession { daemon, sway, agent in
            _ = try VarlinkClient(path: daemon.socketPath).call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            let mail = try WaylandApp(sway, socket: daemon.socketPath, app: Self.mail, titles: ["Inbox"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.mail, "active")
            let opened = try mail.callbacks(6)
            #expect(opened.suffix(3) == ["Inbox willConnect", "Inbox willEnterForeground", "Inbox didBecomeActive"])

            try? sway.command("exit")
            #expect(agent.child.wait(timeout: .seconds(20)) == 0, "\(agent.output)")
            #expect(agent.output.contains { $0.contains("closed the connection: the session's windows are gone") }, "\(agent.output)")
        }
    }

    /// The scene of `app` whose title is `title`, by its id, as GetApp lists it.
    static func scene(_ daemon: DaemonProcess, _ app: String, titled title: String) throws -> String {
        let client = try VarlinkClient(path: daemon.socketPath)
        return try waitUntil("a scene of \(app) titled \(title)") { () throws -> String? in
            let scenes = try client.call("io.coalesced.System.GetApp", ["app": .string(app)])["app"]?["scenes"]?.arrayValue ?? []
            return scenes.first { $0["title"]?.stringValue == title }?["id"]?.stringValue
        }
    }

    /// An operator focuses a scene by its id (`coalescectl activate APP --scene ID`): the agent asks the compositor,
    /// through sway's IPC or through the protocol's `activate`, and the focus comes back as the user's would. With no
    /// agent to ask, the operator hears why.
    @Test(arguments: ["sway", "wayland"])
    func activatingASceneAsksTheCompositorToFocusItsWindow(source: String) async throws {
        try await ScreenAgentSwayTests.withSession(source: source) { daemon, sway, agent in
            try agent.waitForLine(containing: "may ask this session to focus its windows")
            let registrar = try VarlinkClient(path: daemon.socketPath)
            for app in [Self.mail, Self.maps] { _ = try registrar.call("io.coalesced.App.Register", ["name": .string(app)]) }
            let mail = try WaylandApp(sway, socket: daemon.socketPath, app: Self.mail, titles: ["Inbox"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.mail, "active")
            _ = try mail.callbacks(6)
            let maps = try WaylandApp(sway, socket: daemon.socketPath, app: Self.maps, titles: ["Map"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.maps, "active")
            _ = try mail.callbacks(2)
            _ = try maps.callbacks(6)
            let inbox = try Self.scene(daemon, Self.mail, titled: "Inbox")

            let coalescectl = BuildProducts.path(of: "coalescectl")
            let run = try runProcess(coalescectl, ["--socket", daemon.socketPath, "activate", Self.mail, "--scene", inbox])
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            let mapsResigned = try maps.callbacks(2)
            #expect(mapsResigned == ["Map willResignActive", "willResignActive"])
            let mailActive = try mail.callbacks(2)
            #expect(mailActive == ["didBecomeActive", "Inbox didBecomeActive"])
            try ScreenAgentSwayTests.waitForState(daemon, Self.mail, "active")

            // A scene the app does not have, and one nobody can focus once the agent is gone.
            let unknown = try runProcess(coalescectl, ["--socket", daemon.socketPath, "activate", Self.mail, "--scene", "404"])
            #expect(unknown.status != 0 && unknown.stderr.contains("NoSuchScene"), "\(unknown.stderr)")
            agent.child.signal(SIGTERM)
            #expect(agent.child.wait(timeout: .seconds(20)) == 0, "\(agent.output)")
            let map = try Self.scene(daemon, Self.maps, titled: "Map")
            try waitUntil("the agent's focus stream to be gone") {
                let refused = try runProcess(coalescectl, ["--socket", daemon.socketPath, "activate", Self.maps, "--scene", map])
                return refused.status != 0 && refused.stderr.contains("SceneNotFocusable") && refused.stderr.contains("coalesce-screen-agent")
            }
        }
    }

    @Test func aToplevelIsFocusedWhileActivatedAndHiddenWhileMinimized() {
        #expect(WaylandWindows.presentation(activated: true, minimized: false) == .focused)
        #expect(WaylandWindows.presentation(activated: false, minimized: false) == .shown)
        #expect(WaylandWindows.presentation(activated: false, minimized: true) == .hidden)
        #expect(WaylandWindows.presentation(activated: true, minimized: true) == .hidden)
    }
}
