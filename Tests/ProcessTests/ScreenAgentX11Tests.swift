import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// coalesce-screen-agent on a real X session (Xvfb and openbox, driven with xdotool as a person would with the
/// mouse), between it and the real daemon: the windows of apps, each one x11-window process that shows them and
/// attaches, become the apps' scenes, and focusing, minimizing, moving to another desktop and closing them take the
/// apps through their lifecycles.
@Suite struct ScreenAgentX11Tests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// The daemon (every deadline an hour away, suspended apps left running), an X session, the apps registered,
    /// and the agent following the session for the daemon, found by `auto` from DISPLAY.
    static func withSession(
        apps: [String],
        _ body: @escaping @Sendable (DaemonProcess, XvfbSession, WatchedProcess, VarlinkClient) throws -> Void
    ) async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines + "LaunchTimeoutSec=1h\n")
        defer { daemon.signal(SIGKILL) }
        try await onThread {
            try daemon.waitUntilReady()
            let session = try XvfbSession()
            defer { session.stop() }
            let requests = try testClient(daemon.socketPath)
            for app in apps { _ = try requests.call("io.coalesced.App.Register", ["name": .string(app)]) }
            let agent = try WatchedProcess(
                BuildProducts.path(of: "coalesce-screen-agent"), ["--socket", daemon.socketPath],
                environment: ["DISPLAY": session.display, "SWAYSOCK": ""]
            )
            defer { agent.child.signal(SIGKILL) }
            try agent.waitForLine(containing: "following the x11 session's windows (0 now)")
            try body(daemon, session, agent, requests)
        }
    }

    /// Starts `titles` of `app` as one process that attaches; acknowledges its launch, and sends it home
    /// (System.Deactivate) until it is suspended, unless `deactivated` is false.
    static func launched(
        _ app: String, _ titles: [String], iconic: Bool, on session: XvfbSession, daemon: DaemonProcess,
        requests: VarlinkClient, deactivated: Bool = true
    ) throws -> X11App {
        let process = try X11App(app, titles, on: session, socket: daemon.socketPath, options: iconic ? ["--iconic"] : [])
        let launch = try process.nextCallbacks(3)
        #expect(launch.callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try Self.acknowledge(process, launch.seq, requests)
        guard deactivated else { return process }
        _ = try requests.call("io.coalesced.System.Deactivate", ["app": .string(app)])
        let home = try process.nextCallbacks(2)
        #expect(home.callbacks == ["willResignActive", "didEnterBackground"])
        try Self.acknowledge(process, home.seq, requests)
        try waitForApp(requests, app, "state", "suspended")
        return process
    }

    static func acknowledge(_ app: X11App, _ seq: JSONValue, _ requests: VarlinkClient) throws {
        _ = try requests.call("io.coalesced.App.Ack", ["app": .string(app.app), "seq": seq])
    }

    static func waitForLog(_ daemon: DaemonProcess, _ text: String) throws {
        try waitUntil("the daemon to log '\(text)'", poll: .milliseconds(20)) { daemon.output.contains(text) }
    }

    @Test func focusMinimizingDesktopsAndClosingDriveTheAppsScenes() async throws {
        try await Self.withSession(apps: [Self.mail, Self.maps]) { daemon, session, _, requests in
            // Two apps, suspended before their windows are seen: minimized from the start (ICCCM's IconicState), so
            // that their scenes connect in the background, and what they are told waits for them to wake.
            let mail = try Self.launched(Self.mail, ["Inbox", "Draft"], iconic: true, on: session, daemon: daemon, requests: requests)
            let maps = try Self.launched(Self.maps, ["Map"], iconic: true, on: session, daemon: daemon, requests: requests)
            try mail.map()
            try maps.map()
            for (app, title) in [(mail, "Inbox"), (mail, "Draft"), (maps, "Map")] {
                try Self.waitForLog(daemon, "\(app.app): scene \(app.id(title)) unattached → background")
            }
            #expect(mail.unread.isEmpty && maps.unread.isEmpty, "held while the apps run no code")
            let inbox = try #require(mail.windows["Inbox"])
            let draft = try #require(mail.windows["Draft"])

            // Its first window focused: mail wakes, hears its scenes connect, and comes forward with the window.
            try session.xdotool(["windowactivate", "--sync"], inbox)
            let forward = try mail.nextCallbacks(6)
            #expect(forward.callbacks == [
                "willEnterForeground", "willConnect Inbox", "willConnect Draft", "willEnterForeground Inbox", "didBecomeActive",
                "didBecomeActive Inbox",
            ])
            try Self.acknowledge(mail, forward.seq, requests)
            try waitForApp(requests, Self.mail, "state", "active")
            let connect = mail.replies.compactMap { $0["callback"] }.first { $0["kind"] == "scene.willConnect" }
            #expect(connect?["source"] == "x11")

            // Another app's window takes the focus: mail's window stays on screen, and mail is inactive.
            try session.xdotool(["windowactivate", "--sync"], try #require(maps.windows["Map"]))
            let resigned = try mail.nextCallbacks(2)
            #expect(resigned.callbacks == ["willResignActive Inbox", "willResignActive"])
            let mapsForward = try maps.nextCallbacks(5)
            #expect(mapsForward.callbacks == [
                "willEnterForeground", "willConnect Map", "willEnterForeground Map", "didBecomeActive", "didBecomeActive Map",
            ])
            try Self.acknowledge(maps, mapsForward.seq, requests)
            try waitForApp(requests, Self.mail, "state", "inactive")
            try waitForApp(requests, Self.maps, "state", "active")

            // Minimized (openbox sets _NET_WM_STATE_HIDDEN): mail's last window on screen goes, and mail with it.
            try session.xdotool(["windowminimize", "--sync"], inbox)
            let minimized = try mail.nextCallbacks(2)
            #expect(minimized.callbacks == ["didEnterBackground Inbox", "didEnterBackground"])
            try waitForApp(requests, Self.mail, "state", "background")
            try Self.acknowledge(mail, minimized.seq, requests)
            try waitForApp(requests, Self.mail, "state", "suspended")

            // The other window, minimized from the start, focused: it comes forward, and maps resigns.
            try session.xdotool(["windowactivate", "--sync"], draft)
            let drafting = try mail.nextCallbacks(4)
            #expect(drafting.callbacks == ["willEnterForeground", "willEnterForeground Draft", "didBecomeActive", "didBecomeActive Draft"])
            #expect(try maps.nextCallbacks(2).callbacks == ["willResignActive Map", "willResignActive"])
            try Self.acknowledge(mail, drafting.seq, requests)

            // Closed: the minimized window's scene disconnects, and nothing else changes for mail.
            try session.xdotool(["windowclose"], inbox)
            #expect(try mail.nextCallbacks(1).callbacks == ["didDisconnect Inbox"])

            // Sent to another desktop (openbox marks it Iconic there, not hidden): it leaves the screen, and mail too.
            try session.xdotool(["set_desktop_for_window"], draft, ["1"])
            let away = try mail.nextCallbacks(4)
            #expect(away.callbacks == ["willResignActive Draft", "willResignActive", "didEnterBackground Draft", "didEnterBackground"])
            try waitForApp(requests, Self.mail, "state", "background")
            try Self.acknowledge(mail, away.seq, requests)

            // That desktop shown (_NET_CURRENT_DESKTOP): the window is back, focused; maps's is on the other.
            try session.run("xdotool", ["set_desktop", "1"])
            let back = try mail.nextCallbacks(4)
            #expect(back.callbacks == ["willEnterForeground", "willEnterForeground Draft", "didBecomeActive", "didBecomeActive Draft"])
            try waitForApp(requests, Self.mail, "state", "active")
            try waitForApp(requests, Self.maps, "state", "background")
            // Whether openbox gave maps's window the focus between the two moves is its own affair: how maps ends is not.
            var mapsLast: [String] = []
            try waitUntil("maps to hear that it left the screen (its last callbacks: \(mapsLast))") {
                mapsLast = maps.unread.suffix(2).map { "\($0["kind"]?.stringValue ?? "?") \($0["scene"]?.stringValue ?? "-")" }
                return mapsLast == ["scene.didEnterBackground \(maps.id("Map"))", "lifecycle.didEnterBackground -"]
            }
        }
    }

    /// An operator focuses a scene by its id: the agent asks openbox, as a pager would, and the focus comes back
    /// as the user's would.
    @Test func activatingASceneAsksTheWindowManagerToFocusItsWindow() async throws {
        try await Self.withSession(apps: [Self.mail]) { daemon, session, agent, requests in
            try agent.waitForLine(containing: "may ask this session to focus its windows")
            let mail = try Self.launched(
                Self.mail, ["Inbox", "Draft"], iconic: false, on: session, daemon: daemon, requests: requests, deactivated: false
            )
            try mail.map()
            try session.xdotool(["windowactivate", "--sync"], try #require(mail.windows["Draft"]))
            try waitUntil("Draft to be mail's active scene") {
                try requests.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]?["scenes"]?.arrayValue?
                    .contains { $0["id"]?.stringValue == mail.id("Draft") && $0["state"] == "foregroundActive" } == true
            }
            _ = mail.unread

            let run = try runProcess(
                BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "activate", Self.mail, "--scene", mail.id("Inbox")]
            )
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            #expect(run.stderr.contains("asked the session to focus scene \(mail.id("Inbox"))"))
            try agent.waitForLine(containing: "asked the x11 session to focus window \(mail.id("Inbox"))")
            try waitUntil("Inbox to be mail's active scene") {
                try requests.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]?["scenes"]?.arrayValue?
                    .contains { $0["id"]?.stringValue == mail.id("Inbox") && $0["state"] == "foregroundActive" } == true
            }
            let active = try session.run("xprop", ["-root", "_NET_ACTIVE_WINDOW"])
            #expect(active.contains(String(try #require(mail.windows["Inbox"]), radix: 16)), "\(active)")
        }
    }

    @Test func aWindowWithAForgedNetWMPIDIsReportedWithTheProcessTheServerNames() async throws {
        try await Self.withSession(apps: [Self.mail]) { daemon, session, agent, requests in
            let mail = try Self.launched(
                Self.mail, ["Inbox"], iconic: false, on: session, daemon: daemon, requests: requests, deactivated: false
            )
            try mail.map()
            #expect(try mail.nextCallbacks(3).callbacks == ["willConnect Inbox", "willEnterForeground Inbox", "didBecomeActive Inbox"])

            // Another process's window that claims mail's class and, in _NET_WM_PID, mail's process: openbox
            // focuses it as it appears.
            let pid = mail.process.child.pid
            let impostor = try X11App(Self.mail, ["Phish"], on: session, socket: nil, options: ["--net-wm-pid", String(pid)])
            let phish = try #require(impostor.windows["Phish"])
            #expect(try session.run("xprop", ["-id", String(phish), "_NET_WM_PID"]).contains("= \(pid)"))
            try impostor.map()

            // The agent reports it with the pid the X server names, so it is no scene of mail: mail only loses the
            // focus to it, and says nothing of it.
            let claim = try agent.waitForLine(containing: "window \(impostor.id("Phish"))")
            #expect(claim.contains("names the app \(Self.mail), but its process \(impostor.process.child.pid) is not the app's"), "\(claim)")
            #expect(try mail.nextCallbacks(2).callbacks == ["willResignActive Inbox", "willResignActive"])
            try session.xdotool(["windowactivate", "--sync"], try #require(mail.windows["Inbox"]))
            #expect(try mail.nextCallbacks(2).callbacks == ["didBecomeActive", "didBecomeActive Inbox"])
            #expect(!daemon.output.contains("scene \(impostor.id("Phish"))"), "no scene of the impostor's window")
        }
    }

    /// The X server going is the session's end: the agent reports no windows and exits 0, as it does at sway's
    /// shutdown, rather than failing (and being restarted into a session that is gone).
    @Test func theAgentEndsWithTheXServer() async throws {
        try await Self.withSession(apps: []) { _, session, agent, _ in
            session.stop()
            #expect(agent.child.wait(timeout: .seconds(20)) == 0, "\(agent.output)")
            #expect(agent.output.contains { $0.contains("the X server at \(session.display) closed the connection") }, "\(agent.output)")
        }
    }
}
