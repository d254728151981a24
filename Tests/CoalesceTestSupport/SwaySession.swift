import Foundation

/// Headless sway 1.7, a compositor of the caller's own: no display, no input devices, software rendering. Sway
/// refuses to run as root, so it runs as `nobody` with a runtime directory of its own (0700), whose sockets root
/// reaches all the same. For the screen agent's tests and the screen benchmark.
public final class SwaySession: @unchecked Sendable {
    /// Its XDG_RUNTIME_DIR: the Wayland socket and sway's IPC socket are made there.
    public let runtimeDirectory: String
    public let logPath: String
    /// `$SWAYSOCK`: sway's IPC socket.
    public let ipcSocket: String
    private let child: ChildProcess

    public init() throws {
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
    public var clientEnvironment: [String: String] {
        ["XDG_RUNTIME_DIR": self.runtimeDirectory, "WAYLAND_DISPLAY": "wayland-1"]
    }

    /// Runs a sway command (`swaymsg`), such as `[title="^Inbox$"] focus`; throws when sway refuses it.
    public func command(_ command: String) throws {
        let run = try runProcess("/usr/bin/swaymsg", ["-s", self.ipcSocket, command])
        guard run.status == 0 else { throw SupportError("swaymsg '\(command)' failed: \(run.stdout)\(run.stderr)") }
    }

    private static func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}

/// The Wayland test client (Tests/Clients/wl-window.c): an app with one xdg-shell toplevel per title, attached to
/// the daemon from the same process. Built once per run (wayland-scanner for xdg-shell, then cc) in a directory
/// the run keeps.
public enum WaylandWindowClient {
    static let built: Result<String, any Error> = Result {
        try TestClients.build("wl-window") { source, directory, executable in
            let protocolFile = "/usr/share/wayland-protocols/stable/xdg-shell/xdg-shell.xml"
            for (mode, output) in [("client-header", "xdg-shell-client-protocol.h"), ("private-code", "xdg-shell-protocol.c")] {
                let run = try runProcess("/usr/bin/wayland-scanner", [mode, protocolFile, directory.file(output)])
                guard run.status == 0 else { throw SupportError("wayland-scanner \(mode) failed: \(run.stderr)") }
            }
            let flags = try runProcess("/usr/bin/pkg-config", ["--cflags", "--libs", "wayland-client"])
            guard flags.status == 0 else { throw SupportError("pkg-config wayland-client failed: \(flags.stderr)") }
            let compile = try runProcess(
                "/usr/bin/cc",
                ["-O2", "-Wall", "-Wextra", "-Werror", "-I", directory.path, "-o", executable, source,
                 directory.file("xdg-shell-protocol.c")] + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
            )
            guard compile.status == 0 else { throw SupportError("cc wl-window.c failed: \(compile.stderr)") }
        }
    }

    /// The built client's path; the first call builds it.
    public static func path() throws -> String { try Self.built.get() }
}
