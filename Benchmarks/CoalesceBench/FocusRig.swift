import CoalesceTestSupport
import Foundation
import Varlink

/// What one focus change took, from the command sent to sway: to the client's `activated` configure (the
/// compositor's own event, the floor) and to the target scene's `scene.didBecomeActive` on the app's stream, both
/// stamped by the client (wl-window --stamp) on CLOCK_MONOTONIC.
struct FocusTimes {
    var activated: Int64
    var sceneActive: Int64
}

/// Headless sway, the daemon and coalesce-screen-agent between them, and one registered app with two windows in
/// one process (Tests/Clients/wl-window.c with --stamp), attached from that process: each focus change between the
/// windows makes one of its scenes didBecomeActive. The benchmark drives sway through an IPC connection of its own.
final class FocusRig {
    static let app = "org.bench.screen"
    static let titles = ["Left", "Right"]

    let daemon: DaemonProcess
    let sway: SwaySession
    let agent: WatchedProcess
    private let commands: SwayCommandSocket
    private let window: ChildProcess
    private let lines: StampedLines
    private let requests: VarlinkClient
    /// How long one switch may take before the run fails.
    private let timeout: Duration
    /// Sway's container ids of the windows, by title: their scenes' ids.
    private(set) var ids: [String: Int] = [:]
    /// The title of the window that has the focus.
    private(set) var focused = ""
    /// The highest sequence number on the app's stream, and the highest acknowledged.
    private var lastSequence: Int64 = 0
    private var acknowledged: Int64 = 0
    /// Callbacks read on the app's stream so far, the scenes' and the app's own.
    private(set) var callbacksRead = 0

    /// Starts sway, the agent (with `agentArguments` besides its socket and source) and the app's windows beside
    /// `daemon`, which is ready; returns once both windows are scenes of the app and one of them is active.
    init(daemon: DaemonProcess, agentArguments: [String] = [], timeout: Duration) throws {
        self.daemon = daemon
        self.timeout = timeout
        self.sway = try SwaySession()
        self.agent = try WatchedProcess(
            BuildProducts.path(of: "coalesce-screen-agent"),
            ["--socket", daemon.socketPath, "--source", "sway"] + agentArguments,
            environment: ["SWAYSOCK": self.sway.ipcSocket]
        )
        try self.agent.waitForLine(containing: "following the wayland session's windows", timeout: timeout)
        self.commands = try SwayCommandSocket(path: self.sway.ipcSocket, timeout: timeout)
        self.requests = try VarlinkClient(path: daemon.socketPath)
        _ = try self.requests.call("io.coalesced.App.Register", ["name": .string(Self.app)])

        let ends = try closeOnExecPipe()
        let environment = ProcessInfo.processInfo.environment.merging(self.sway.clientEnvironment) { _, session in session }
        do {
            self.window = try ChildProcess(
                try WaylandWindowClient.path(), ["--stamp", Self.app, daemon.socketPath] + Self.titles,
                environment: environment, output: ends.write
            )
        } catch {
            close(ends.read)
            close(ends.write)
            throw error
        }
        close(ends.write)
        self.lines = StampedLines(descriptor: ends.read)

        // Sway focuses each window as it maps, so the last one ends with the focus: ready once the tree says so and
        // its scene has become active on the app's stream.
        let deadline = ContinuousClock.now + timeout
        var connected: Set<String> = []
        var active: String?
        while true {
            let views = try self.commands.views().filter { $0["app_id"]?.stringValue == Self.app }
            if views.count == Self.titles.count, let focused = views.first(where: { $0["focused"]?.boolValue == true }),
                connected.count == Self.titles.count, active == focused["id"]?.intValue.map(String.init)
            {
                for view in views {
                    guard let title = view["name"]?.stringValue, let id = view["id"]?.intValue else { continue }
                    self.ids[title] = Int(id)
                }
                self.focused = focused["name"]?.stringValue ?? ""
                break
            }
            guard let line = try self.lines.next(until: deadline) else {
                throw SupportError("the app's two scenes did not connect within \(timeout); \(self.context)")
            }
            guard case .reply(let reply, _) = line, let callback = self.callback(reply) else { continue }
            if callback.kind == "scene.willConnect", let scene = callback.scene { connected.insert(scene) }
            if callback.kind == "scene.didBecomeActive" { active = callback.scene }
        }
        try self.acknowledge()
    }

    deinit {
        self.window.signal(SIGTERM)
        if self.window.wait(timeout: .seconds(5)) == nil {
            self.window.signal(SIGKILL)
            _ = self.window.wait()
        }
    }

    /// Moves the focus to the other window with `[con_id=ID] focus` on sway's IPC socket, and waits for the client's
    /// `activated` configure and the scene's didBecomeActive on the app's stream.
    /// - Throws: when either does not come within the rig's timeout: a lost switch fails the run.
    func switchFocus() throws -> FocusTimes {
        guard let target = Self.titles.first(where: { $0 != self.focused }), let id = self.ids[target] else {
            throw SupportError("no window to move the focus to; sway's windows: \(self.ids)")
        }
        let scene = String(id)
        let start = monotonicNanoseconds()
        try self.commands.run("[con_id=\(id)] focus")
        let deadline = ContinuousClock.now + self.timeout
        var activated: Int64?
        var sceneActive: Int64?
        while activated == nil || sceneActive == nil {
            guard let line = try self.lines.next(until: deadline) else {
                let missing = [activated == nil ? "the activated configure" : nil, sceneActive == nil ? "scene.didBecomeActive" : nil]
                throw SupportError(
                    "focus to \(target) (window \(id)): no \(missing.compactMap { $0 }.joined(separator: " and ")) "
                        + "within \(self.timeout); \(self.context)"
                )
            }
            switch line {
            case .activated(let title, let at) where title == target && at >= start:
                activated = at
            case .reply(let reply, let at):
                if let callback = self.callback(reply), callback.kind == "scene.didBecomeActive", callback.scene == scene, at >= start {
                    sceneActive = at
                }
            default:
                break
            }
        }
        self.focused = target
        return FocusTimes(activated: activated! - start, sceneActive: sceneActive! - start)
    }

    /// Acknowledges everything the app has been sent (`io.coalesced.App.Ack` as root, on a connection of the
    /// benchmark's), as the app would.
    func acknowledge() throws {
        guard self.lastSequence > self.acknowledged else { return }
        _ = try self.requests.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": .int(self.lastSequence)])
        self.acknowledged = self.lastSequence
    }

    /// The callbacks that come on the app's stream within `duration`.
    func callbacks(within duration: Duration) throws -> Int {
        let deadline = ContinuousClock.now + duration
        var count = 0
        while let line = try self.lines.next(until: deadline) {
            if case .reply(let reply, _) = line, self.callback(reply) != nil { count += 1 }
        }
        return count
    }

    /// `io.coalesced.System.Stats`.
    func stats() throws -> JSONValue {
        try self.requests.call("io.coalesced.System.Stats")["stats"] ?? .null
    }

    /// The windows as the agent reports them now (`io.coalesced.Screen`'s `Window`), from sway's tree.
    func windowsAsReported() throws -> [JSONValue] {
        try self.commands.views().map { view in
            let presentation = view["focused"]?.boolValue == true ? "focused" : view["visible"]?.boolValue == true ? "shown" : "hidden"
            return [
                "id": .string(String(view["id"]?.intValue ?? 0)), "appId": view["app_id"] ?? .null, "pid": view["pid"] ?? .null,
                "presentation": .string(presentation), "title": view["name"] ?? .null,
            ]
        }
    }

    /// Calls `io.coalesced.Screen.ReportWindows` for the agent's source with `windows`.
    func report(_ windows: [JSONValue]) throws -> JSONObject {
        try self.requests.call("io.coalesced.Screen.ReportWindows", ["source": "wayland", "windows": .array(windows)])
    }

    /// A callback on the app's stream; notes its number.
    private func callback(_ reply: JSONValue) -> (kind: String, scene: String?)? {
        guard let callback = reply["parameters"]?["callback"], let kind = callback["kind"]?.stringValue else { return nil }
        self.callbacksRead += 1
        if let seq = callback["seq"]?.intValue { self.lastSequence = max(self.lastSequence, seq) }
        return (kind, callback["scene"]?.stringValue)
    }

    /// What the client printed last and what the agent said, for a failure's message.
    private var context: String {
        "wl-window's last lines:\n\(self.lines.recent.joined(separator: "\n"))\nthe agent's output:\n"
            + self.agent.output.joined(separator: "\n")
    }
}

/// wl-window's standard output under --stamp, read line by line: each line starts with CLOCK_MONOTONIC in
/// nanoseconds, then either `activated TITLE` or a reply of the app's stream.
final class StampedLines {
    enum Line {
        case activated(title: String, at: Int64)
        case reply(JSONValue, at: Int64)
        /// Anything else (what the client says on standard error).
        case other(String)
    }

    private let descriptor: CInt
    private var pending: [UInt8] = []
    /// The last lines read, for messages.
    private(set) var recent: [String] = []

    init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
    }

    /// The next line, or `nil` when none has come by `deadline`.
    /// - Throws: when the client's output has ended.
    func next(until deadline: ContinuousClock.Instant) throws -> Line? {
        while true {
            if let newline = self.pending.firstIndex(of: UInt8(ascii: "\n")) {
                let text = String(decoding: self.pending[..<newline], as: UTF8.self)
                self.pending.removeSubrange(...newline)
                self.recent = Array((self.recent + [text]).suffix(20))
                return try Self.parse(text)
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var ready = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            guard poll(&ready, 1, milliseconds) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            let count = chunk.withUnsafeMutableBytes { read(self.descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw SupportError("wl-window ended; its last lines:\n\(self.recent.joined(separator: "\n"))")
            }
            self.pending += chunk[..<count]
        }
    }

    private static func parse(_ text: String) throws -> Line {
        guard let space = text.firstIndex(of: " "), let at = Int64(text[..<space]) else { return .other(text) }
        let rest = text[text.index(after: space)...]
        if rest.hasPrefix("activated ") { return .activated(title: String(rest.dropFirst("activated ".count)), at: at) }
        return .reply(try JSONParser.parse(String(rest)), at: at)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock wl-window stamps its lines with.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
