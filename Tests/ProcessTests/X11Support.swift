import CoalesceTestSupport
import Foundation
import Varlink

/// An X session of the test's own: Xvfb on a display number it picks itself (`-displayfd`), and openbox, an EWMH
/// window manager, on it with its stock configuration (four desktops, new windows focused).
final class XvfbSession: @unchecked Sendable {
    /// The value of DISPLAY for it, as `:3`.
    let display: String
    let directory: TemporaryDirectory
    private let server: WatchedProcess
    private var windowManager: WatchedProcess?

    init() throws {
        for tool in ["/usr/bin/Xvfb", "/usr/bin/openbox", "/usr/bin/xdotool", "/usr/bin/xprop"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw SupportError(
                "no \(tool): the X11 tests need xvfb, openbox, xdotool and x11-utils (scripts/setup --tests installs them)"
            )
        }
        self.directory = try TemporaryDirectory()
        // -noreset: without it the server resets when its last client leaves, and a client that comes just then
        // (openbox after a probe) is refused.
        let server = try WatchedProcess(
            "/usr/bin/Xvfb", ["-displayfd", "1", "-noreset", "-nolisten", "tcp", "-screen", "0", "1280x720x24"]
        )
        self.server = server
        let number = try waitUntil("Xvfb to name its display", poll: .milliseconds(20)) { () throws -> String? in
            if server.child.hasEnded { throw SupportError("Xvfb ended: \(server.output.joined(separator: "\n"))") }
            return server.output.first { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
        }
        self.display = ":\(number)"
        // Its own HOME: openbox reads the stock configuration, not one the machine's root has.
        self.windowManager = try WatchedProcess(
            "/usr/bin/openbox", ["--sm-disable"], environment: ["DISPLAY": self.display, "HOME": self.directory.path]
        )
        try waitUntil("openbox to manage \(self.display) (_NET_SUPPORTING_WM_CHECK)", poll: .milliseconds(50)) {
            if let openbox = self.windowManager, openbox.child.hasEnded {
                throw SupportError("openbox ended: \(openbox.output.joined(separator: "\n"))")
            }
            return try self.run("xprop", ["-root", "_NET_SUPPORTING_WM_CHECK"]).contains("window id")
        }
    }

    deinit {
        self.stop()
    }

    /// Ends openbox, then the server.
    func stop() {
        for process in [self.windowManager, self.server].compactMap({ $0 }) {
            process.child.signal(SIGTERM)
            _ = process.child.wait(timeout: .seconds(10))
        }
    }

    /// Runs one of the X tools (xdotool, xprop) on this display; throws with its output when it fails.
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) throws -> String {
        let run = try runProcess("/usr/bin/env", ["DISPLAY=\(self.display)", "/usr/bin/\(tool)"] + arguments)
        guard run.status == 0 else {
            throw SupportError("\(tool) \(arguments.joined(separator: " ")) failed (\(run.status)): \(run.stderr)")
        }
        return run.stdout
    }

    /// xdotool on a window (its command first, as `windowactivate --sync`, then the window).
    func xdotool(_ command: [String], _ window: UInt32, _ more: [String] = []) throws {
        try self.run("xdotool", command + [String(window)] + more)
    }
}

/// The test client (Tests/Clients/x11-window.c), built with cc once per test run.
enum X11WindowClient {
    static let built: Result<String, any Error> = Result {
        try TestClients.build("x11-window") { source, _, binary in
            let run = try runProcess(
                "/bin/sh", ["-c", "cc -O1 -Wall -Wextra -Werror -o '\(binary)' '\(source)' $(pkg-config --cflags --libs xcb)"]
            )
            guard run.status == 0 else {
                throw SupportError("cannot build \(source) (gcc, libc6-dev and libxcb1-dev: scripts/setup --tests): \(run.stderr)")
            }
        }
    }

    static func path() throws -> String { try Self.built.get() }
}

/// An app of the test: one x11-window process that shows `titles` as windows of `app` on `session` and, given
/// `socket`, attaches to the daemon there; its stream's replies, each a line, are read as callbacks.
final class X11App: @unchecked Sendable {
    let app: String
    let process: WatchedProcess
    /// Its windows' ids, by title.
    let windows: [String: UInt32]
    private var read = 0

    init(_ app: String, _ titles: [String], on session: XvfbSession, socket: String?, options: [String] = []) throws {
        self.app = app
        var arguments = options
        if let socket { arguments += ["--socket", socket] }
        self.process = try WatchedProcess(
            try X11WindowClient.path(), arguments + [app] + titles, environment: ["DISPLAY": session.display], input: true
        )
        let process = self.process
        let lines = try waitUntil("x11-window to create \(titles)") { () throws -> [String]? in
            if process.child.hasEnded { throw SupportError("x11-window ended: \(process.output)") }
            let lines = process.output.filter { $0.hasPrefix("window ") }
            return lines.count == titles.count ? lines : nil
        }
        var windows: [String: UInt32] = [:]
        for line in lines {
            let fields = line.split(separator: " ", maxSplits: 2)
            windows[String(fields[2])] = UInt32(fields[1].dropFirst(2), radix: 16)
        }
        self.windows = windows
    }

    /// The id of the window titled `title`, as the agent reports it.
    func id(_ title: String) -> String {
        let digits = String(self.windows[title] ?? 0, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// Maps its windows, and waits until it has.
    func map() throws {
        try self.process.write("map\n")
        try self.process.waitForLine("mapped")
    }

    /// The replies of its stream so far.
    var replies: [JSONValue] {
        self.process.output.filter { $0.hasPrefix("{") }.compactMap { try? JSONParser.parse($0)["parameters"] }
    }

    /// The next `count` callbacks, as `willConnect Inbox` for a scene's (named by its window's title) and
    /// `willEnterForeground` for the app's; their highest seq comes with them.
    func nextCallbacks(_ count: Int, timeout: Duration = .seconds(20)) throws -> (callbacks: [String], seq: JSONValue) {
        let titles = Dictionary(uniqueKeysWithValues: self.windows.keys.map { (self.id($0), $0) })
        let found = try waitUntil("\(count) more callbacks of \(self.app); it has: \(self.process.output)", timeout: timeout) {
            () -> [JSONValue]? in
            let callbacks = self.replies.compactMap { $0["callback"] }
            return callbacks.count >= self.read + count ? Array(callbacks[self.read..<(self.read + count)]) : nil
        }
        self.read += count
        let names = found.map { callback -> String in
            let kind = callback["kind"]?.stringValue ?? "?"
            guard let scene = callback["scene"]?.stringValue else { return String(kind.dropFirst("lifecycle.".count)) }
            return "\(kind.dropFirst("scene.".count)) \(titles[scene] ?? scene)"
        }
        return (names, found.last?["seq"] ?? .null)
    }

    /// The callbacks it has beyond those ``nextCallbacks(_:timeout:)`` returned.
    var unread: [JSONValue] { Array(self.replies.compactMap { $0["callback"] }.dropFirst(self.read)) }
}
