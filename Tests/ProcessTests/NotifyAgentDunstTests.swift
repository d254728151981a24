import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// An X server of the test's own: Xvfb on a display number no other server holds.
final class VirtualDisplay: @unchecked Sendable {
    /// The value of DISPLAY for it, as `:123`.
    let name: String
    private let process: WatchedProcess

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb") else {
            throw SupportError(
                "no /usr/bin/Xvfb: the dunst tests need it (Debian package xvfb; scripts/setup --tests installs it)"
            )
        }
        // A number from the test's pid; the next one when a server holds it or took it first.
        let first = 100 + Int(getpid() % 800)
        for number in first..<(first + 20) {
            guard !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"),
                !FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock")
            else { continue }
            let process = try WatchedProcess(
                "/usr/bin/Xvfb",
                [":\(number)", "-nolisten", "tcp", "-screen", "0", "1024x768x24"]
            )
            let ready = try waitUntil("Xvfb to listen on :\(number) or end", poll: .milliseconds(20)) { () -> Bool? in
                if process.child.hasEnded { return false }
                return FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") ? true : nil
            }
            if ready {
                self.name = ":\(number)"
                self.process = process
                return
            }
        }
        throw SupportError("Xvfb found no free display from :\(first) to :\(first + 19)")
    }

    deinit {
        self.stop()
    }

    /// Ends the server.
    func stop() {
        self.process.child.signal(SIGTERM)
        _ = self.process.child.wait(timeout: .seconds(10))
    }
}

/// dunst, a real notification server, on a ``SessionBus`` and a ``VirtualDisplay``, with a configuration of the
/// test's own: notifications stay until they are closed, and its menu program stands in for the user at the
/// context menu: it records the lines dunst offers and picks the first that contains `menuChoice`.
final class Dunst: @unchecked Sendable {
    let bus: SessionBus
    /// Where the menu program writes what dunst offered it.
    let menuPath: String
    private let process: WatchedProcess

    init(on bus: SessionBus, display: VirtualDisplay, menuChoice: String) throws {
        for tool in ["/usr/bin/dunst", "/usr/bin/dunstctl"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw SupportError(
                "no \(tool): the dunst tests need it (Debian package dunst; scripts/setup --tests installs it)"
            )
        }
        self.bus = bus
        self.menuPath = bus.directory.file("menu.txt")
        try bus.directory.write("menu.sh", "tee -a '\(self.menuPath)' | grep -F -m 1 -e '\(menuChoice)'\n")
        try bus.directory.write(
            "dunstrc",
            """
            [global]
                force_xwayland = true
                dmenu = "/bin/sh \(bus.directory.file("menu.sh"))"
            [urgency_low]
                timeout = 0
            [urgency_normal]
                timeout = 0
            [urgency_critical]
                timeout = 0

            """
        )
        self.process = try WatchedProcess(
            "/usr/bin/dunst",
            ["-config", bus.directory.file("dunstrc")],
            environment: ["DISPLAY": display.name, "DBUS_SESSION_BUS_ADDRESS": bus.address]
        )
        try waitUntil("dunst to own org.freedesktop.Notifications", poll: .milliseconds(50)) {
            if self.process.child.hasEnded {
                throw SupportError("dunst ended: \(self.process.output.joined(separator: "\n"))")
            }
            return try bus.hasOwner("org.freedesktop.Notifications")
        }
    }

    deinit {
        self.stop()
    }

    /// Ends dunst.
    func stop() {
        self.process.child.signal(SIGTERM)
        _ = self.process.child.wait(timeout: .seconds(10))
    }

    /// Runs dunstctl against this bus; throws with its output when it fails.
    @discardableResult
    func ctl(_ arguments: [String]) throws -> String {
        let run = try runProcess(
            "/usr/bin/env",
            ["DBUS_SESSION_BUS_ADDRESS=\(self.bus.address)", "/usr/bin/dunstctl"] + arguments
        )
        guard run.status == 0 else {
            throw SupportError("dunstctl \(arguments.joined(separator: " ")) failed: \(run.stderr)")
        }
        return run.stdout
    }

    /// How many notifications are on the screen.
    func displayed() throws -> Int {
        let text = try self.ctl(["count", "displayed"]).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let count = Int(text) else { throw SupportError("dunstctl count displayed printed '\(text)'") }
        return count
    }

    /// The closed notifications dunst keeps, newest first, as `dunstctl history` prints them: each field's value.
    func history() throws -> [[String: String]] {
        let text = try self.ctl(["history"])
        let data = try JSONParser.parse(text).objectValue?["data"]?.arrayValue?.first?.arrayValue
        guard let data else { throw SupportError("dunstctl history printed no list: \(text)") }
        return data.map { entry in
            var fields: [String: String] = [:]
            for (key, field) in entry.objectValue ?? [:] {
                guard let value = field.objectValue?["data"] else { continue }
                fields[key] = value.stringValue ?? value.jsonText
            }
            return fields
        }
    }

    /// The server's capabilities, from GetCapabilities.
    func capabilities() throws -> String {
        let run = try runProcess("/usr/bin/busctl", [
            "--address=\(self.bus.address)", "call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
            "org.freedesktop.Notifications", "GetCapabilities",
        ])
        guard run.status == 0 else { throw SupportError("busctl GetCapabilities failed: \(run.stderr)") }
        return run.stdout
    }
}

/// The agent between the real daemon and dunst, a real notification server, on a private session bus and Xvfb:
/// what an app schedules is shown by dunst with its buttons, and the user's choice at dunst's menu, dunst's default
/// action and a dismissal each reach the app.
///
/// The user's hand is dunstctl: `dunstctl context` opens dunst's menu of the buttons on the screen (its menu program
/// is the test's script, which picks one), `dunstctl action 0` invokes the default action of the notification on
/// top (dunst signals it only when the notification's actions have the key `default`), `dunstctl close` closes it as
/// dismissed by the user (reason 2). The first two are closed that way too once answered: the app's three responses,
/// and no others, show that the agent does not answer a dismissal after an answer.
@Suite struct NotifyAgentDunstTests {
    static let app = "org.example.dunst"

    @Test func dunstShowsTheNotificationAndTheUsersAnswersReachTheApp() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1h\nLaunchTimeoutSec=1h\n")
        defer { daemon.signal(SIGKILL) }
        try await onThread { try daemon.waitUntilReady() }
        let token = UUID().uuidString.prefix(8)
        try await onThread {
            let bus = try SessionBus()
            defer { bus.stop() }
            let display = try VirtualDisplay()
            defer { display.stop() }
            let dunst = try Dunst(on: bus, display: display, menuChoice: "#Snooze (Lunch \(token))")
            defer { dunst.stop() }
            // dunst lists actions, so the agent sends buttons.
            #expect(try dunst.capabilities().contains(#""actions""#))

            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            let agent = try WatchedProcess(
                BuildProducts.path(of: "coalesce-notify-agent"),
                ["--socket", daemon.socketPath],
                environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address]
            )
            defer { agent.child.signal(SIGKILL) }
            try agent.waitForLine(containing: "listening for presentations")

            /// Schedules `id` due now and waits until dunst shows it (the one before it has gone to the history).
            func show(_ id: String, title: String, body: String) throws {
                _ = try client.call("io.coalesced.Notifications.Schedule", [
                    "app": .string(Self.app),
                    "request": [
                        "id": .string(id),
                        "trigger": ["at": .double(Date().timeIntervalSince1970)],
                        "content": [
                            "title": .string(title), "body": .string(body),
                            "actions": [["id": "snooze", "title": "Snooze"]],
                        ],
                    ],
                ])
                try waitUntil("dunst to show \(id)", poll: .milliseconds(50)) { try dunst.displayed() == 1 }
            }
            /// Closes the notification on top as the user does, and waits until dunst's history has it as the agent
            /// sent it.
            func closeAndFindInHistory(title: String, body: String) throws {
                try dunst.ctl(["close"])
                let entry = try waitUntil("dunst's history to hold '\(title)'", poll: .milliseconds(50)) {
                    try dunst.history().first { $0["summary"] == title }
                }
                #expect(entry["body"] == body, "\(entry)")
                #expect(entry["appname"] == Self.app, "\(entry)")
            }
            func answered(_ action: String, _ id: String) throws {
                try waitUntil("the daemon to log the answer \(action) to \(id)", poll: .milliseconds(50)) {
                    daemon.output.split(separator: "\n").contains {
                        $0.contains("Notification answered: \(action) ") && $0.contains(" notification=\(id) ")
                    }
                }
            }

            // A button, at dunst's menu: dunst offers the agent's buttons under their titles, Open for the default.
            try show("lunch-\(token)", title: "Lunch \(token)", body: "At noon \(token)")
            try dunst.ctl(["context"])
            try answered("snooze", "lunch-\(token)")
            let menu = (try? String(contentsOfFile: dunst.menuPath, encoding: .utf8)) ?? ""
            #expect(menu.contains("#Open (Lunch \(token)) ["), "\(menu)")
            #expect(menu.contains("#Snooze (Lunch \(token)) ["), "\(menu)")
            try closeAndFindInHistory(title: "Lunch \(token)", body: "At noon \(token)")

            // The default action: the click on the notification.
            try show("call-\(token)", title: "Call \(token)", body: "Ann rang \(token)")
            try dunst.ctl(["action", "0"])
            try answered("default", "call-\(token)")
            try closeAndFindInHistory(title: "Call \(token)", body: "Ann rang \(token)")

            // A dismissal: closed by the user with no answer before it.
            try show("tea-\(token)", title: "Tea \(token)", body: "Kettle on \(token)")
            try closeAndFindInHistory(title: "Tea \(token)", body: "Kettle on \(token)")
            try answered("dismiss", "tea-\(token)")

            // The app the answers launched gets each of them, in order, and nothing else.
            let app = try ExampleApp(socket: daemon.socketPath, name: Self.app)
            for (id, action) in [("lunch", "snooze"), ("call", "default"), ("tea", "dismiss")] {
                try app.waitForLine("notification didReceiveResponse id=\(id)-\(token) action=\(action) ")
            }
            let responses = app.output.filter { $0.hasPrefix("notification didReceiveResponse") }
            let ids = responses.map { String($0.split(separator: " ")[2]) }
            #expect(ids == ["id=lunch-\(token)", "id=call-\(token)", "id=tea-\(token)"], "\(responses)")
        }
    }
}
