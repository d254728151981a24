import CoalesceTestSupport
import Foundation
import Varlink

/// Headless sway 1.7, a compositor of the test's own: no display, no input devices, software rendering. Sway
/// refuses to run as root, so it runs as `nobody` with a runtime directory of its own (0700), whose sockets root
/// reaches all the same.
final class SwaySession: @unchecked Sendable {
    /// Its XDG_RUNTIME_DIR: the Wayland socket and sway's IPC socket are made there.
    let runtimeDirectory: String
    let logPath: String
    /// `$SWAYSOCK`: sway's IPC socket.
    let ipcSocket: String
    private let child: ChildProcess

    init() throws {
        var template = Array("/tmp/coalesced-sway-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SupportError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        self.runtimeDirectory = String(cString: made)
        self.logPath = self.runtimeDirectory + "/sway.log"
        let configuration = self.runtimeDirectory + "/sway.conf"
        try """
        xwayland disable
        output HEADLESS-1 resolution 1280x720 position 0,0
        workspace 1 output HEADLESS-1
        focus_follows_mouse no
        """.write(toFile: configuration, atomically: false, encoding: .utf8)
        for path in [self.runtimeDirectory, configuration] { chown(path, 65534, 65534) }
        chmod(self.runtimeDirectory, 0o700)
        let log = open(self.logPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(log) }
        self.child = try ChildProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/sway", "-c", configuration],
            environment: [
                "PATH": "/usr/bin:/bin", "HOME": self.runtimeDirectory, "XDG_RUNTIME_DIR": self.runtimeDirectory,
                "WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman",
            ],
            output: log
        )
        let directory = self.runtimeDirectory
        let child = self.child
        let logPath = self.logPath
        // Ready once its IPC socket answers (about 50 ms).
        self.ipcSocket = try waitUntil("sway to answer on its IPC socket; its log:\n\(Self.read(logPath))", timeout: .seconds(20)) {
            () throws -> String? in
            guard !child.hasEnded else { throw SupportError("sway ended; its log:\n\(Self.read(logPath))") }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            guard let name = names.first(where: { $0.hasPrefix("sway-ipc.") && $0.hasSuffix(".sock") }) else { return nil }
            let socket = directory + "/" + name
            return try runProcess("/usr/bin/swaymsg", ["-s", socket, "-t", "get_version"]).status == 0 ? socket : nil
        }
    }

    deinit {
        self.child.signal(SIGTERM)
        if self.child.wait(timeout: .seconds(10)) == nil {
            self.child.signal(SIGKILL)
            _ = self.child.wait()
        }
        try? FileManager.default.removeItem(atPath: self.runtimeDirectory)
    }

    /// What a Wayland client of this session needs in its environment.
    var clientEnvironment: [String: String] {
        ["XDG_RUNTIME_DIR": self.runtimeDirectory, "WAYLAND_DISPLAY": "wayland-1"]
    }

    /// Runs a sway command (`swaymsg`), such as `[title="^Inbox$"] focus`; throws when sway refuses it.
    func command(_ command: String) throws {
        let run = try runProcess("/usr/bin/swaymsg", ["-s", self.ipcSocket, command])
        guard run.status == 0 else { throw SupportError("swaymsg '\(command)' failed: \(run.stdout)\(run.stderr)") }
    }

    private static func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}

/// An app with Wayland windows (Tests/Clients/wl-window.c): one process that opens a window per title and attaches
/// to the daemon, printing each reply of its stream as a line.
final class WaylandApp: @unchecked Sendable {
    let name: String
    let process: WatchedProcess
    private var read = 0

    /// wl-window, built once per test run (wayland-scanner for xdg-shell, then cc) in a directory the run keeps.
    private final class Build: Sendable {
        let directory: TemporaryDirectory
        let executable: String

        init() throws {
            self.directory = try TemporaryDirectory()
            self.executable = self.directory.file("wl-window")
            let protocolFile = "/usr/share/wayland-protocols/stable/xdg-shell/xdg-shell.xml"
            let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Clients/wl-window.c").path
            for (mode, output) in [("client-header", "xdg-shell-client-protocol.h"), ("private-code", "xdg-shell-protocol.c")] {
                let run = try runProcess("/usr/bin/wayland-scanner", [mode, protocolFile, self.directory.file(output)])
                guard run.status == 0 else { throw SupportError("wayland-scanner \(mode) failed: \(run.stderr)") }
            }
            let flags = try runProcess("/usr/bin/pkg-config", ["--cflags", "--libs", "wayland-client"])
            guard flags.status == 0 else { throw SupportError("pkg-config wayland-client failed: \(flags.stderr)") }
            let compile = try runProcess(
                "/usr/bin/cc",
                ["-O2", "-Wall", "-Wextra", "-Werror", "-I", self.directory.path, "-o", self.executable, source,
                 self.directory.file("xdg-shell-protocol.c")] + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
            )
            guard compile.status == 0 else { throw SupportError("cc wl-window.c failed: \(compile.stderr)") }
        }
    }

    private static let build = Result { try Build() }

    init(_ sway: SwaySession, socket: String, app: String, titles: [String]) throws {
        self.name = app
        self.process = try WatchedProcess(try Self.build.get().executable, [app, socket] + titles, environment: sway.clientEnvironment)
    }

    var pid: Int32 { self.process.child.pid }

    /// The callbacks the app has been sent and not yet read, as "kind" or "scene kind" for a scene's, waiting until
    /// `count` have come.
    func callbacks(_ count: Int) throws -> [String] {
        try waitUntil("\(count) callbacks of \(self.name) after the \(self.read) read; output:\n\(self.process.output.joined(separator: "\n"))") {
            () throws -> [String]? in
            let all = try self.process.output.compactMap { line -> String? in
                let reply = try JSONParser.parse(line)
                guard let callback = reply["parameters"]?["callback"], let kind = callback["kind"]?.stringValue else { return nil }
                let name = kind.split(separator: ".").last.map(String.init) ?? kind
                return callback["scene"]?.stringValue.map { "\(self.title(ofScene: $0)) \(name)" } ?? name
            }
            guard all.count >= self.read + count else { return nil }
            defer { self.read += count }
            return Array(all[self.read..<self.read + count])
        }
    }

    /// The highest sequence number the app has been sent: what an Ack of everything names.
    var lastSequence: Int64 {
        self.process.output.compactMap { try? JSONParser.parse($0)["parameters"]?["callback"]?["seq"]?.intValue }.max() ?? 0
    }

    /// Scenes are named by sway's container ids; the tests name them by title, as sway's tree says.
    var titles: [String: String] = [:]
    private func title(ofScene id: String) -> String { self.titles[id] ?? id }
}
