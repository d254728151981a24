import Foundation

/// A real systemd booted as PID 1 in fresh namespaces by `Tests/Sandbox/systemd-sandbox.sh`, isolated from the
/// host (its own /run, /tmp, /var/lib/systemd, journal and /dev). Always use it through ``withSystemdSandbox``,
/// which tears it down whatever happens.
public final class SystemdSandbox: @unchecked Sendable {
    public static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sandbox/systemd-sandbox.sh").path

    /// The repository's root, for unit files.
    public static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    public let directory: TemporaryDirectory
    private var bootPID: pid_t = 0
    /// The sandboxed systemd's pid on the host.
    public private(set) var pid: Int32 = 0

    /// Whether the sandbox can run here: it needs root.
    public static var isAvailable: Bool { geteuid() == 0 }

    init(binaries: [String]) throws {
        self.directory = try TemporaryDirectory()
        self.bootPID = try spawnWithDefaultSignals(
            "/bin/bash",
            [Self.script, "boot", self.directory.path, "--timeout", "600"]
                + binaries.flatMap { ["--bin", BuildProducts.path(of: $0)] }
        )
        do {
            let waited = try Self.script(["wait", self.directory.path, "--timeout", "60"])
            guard waited.status == 0 else {
                throw SupportError("the systemd sandbox did not boot: \(waited.stderr)")
            }
            let pidText = try String(contentsOfFile: self.directory.file("pid"), encoding: .utf8)
            guard let pid = Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw SupportError("no pid from the sandbox: \(pidText)")
            }
            self.pid = pid
        } catch {
            self.stop()
            throw error
        }
    }

    func stop() {
        // The harness reports its own failures in boot.log; the test has nothing better to do with them.
        _ = try? Self.script(["stop", self.directory.path, "--timeout", "30"])
        var status: Int32 = 0
        waitpid(self.bootPID, &status, 0)
    }

    /// Runs a command inside the sandbox (its mount and pid namespaces).
    @discardableResult
    public func run(_ arguments: String...) throws -> Run {
        try Self.script(["exec", self.directory.path, "--"] + arguments)
    }

    /// Writes a file inside the sandbox, such as a unit under /run/systemd/system.
    public func write(_ path: String, _ contents: String) throws {
        let outside = "/proc/\(self.pid)/root" + path
        try FileManager.default.createDirectory(
            atPath: (outside as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try contents.write(toFile: outside, atomically: false, encoding: .utf8)
    }

    /// Installs the repository's system units into the sandbox's /run/systemd/system and reloads systemd.
    public func installUnits(dropIns: [String: String] = [:]) throws {
        for unit in ["coalesced.service", "coalesced.socket"] {
            let text = try String(contentsOfFile: Self.repository + "/systemd/" + unit, encoding: .utf8)
            try self.write("/run/systemd/system/" + unit, text)
        }
        for (path, text) in dropIns {
            try self.write("/run/systemd/system/" + path, text)
        }
        try self.run("systemctl", "daemon-reload")
    }

    /// A unit property, as `systemctl show -p NAME --value` prints it.
    public func property(_ unit: String, _ name: String) throws -> String {
        try self.run("systemctl", "show", "-p", name, "--value", unit).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Polls `condition` every 50 ms until it holds or `timeout` passes.
    public func wait(timeout: Duration, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            usleep(50_000)
        }
        return try condition()
    }

    private static func script(_ arguments: [String]) throws -> Run {
        try runProcess("/bin/bash", [self.script] + arguments)
    }
}

/// Boots a sandboxed systemd with the given build products in its /usr/local/bin, runs `body` on a thread of its
/// own, and always tears the sandbox down.
public func withSystemdSandbox<T: Sendable>(
    binaries: [String] = ["coalesced", "coalescectl"],
    _ body: @escaping @Sendable (SystemdSandbox) throws -> T
) async throws -> T {
    try await onThread {
        let sandbox = try SystemdSandbox(binaries: binaries)
        defer { sandbox.stop() }
        return try body(sandbox)
    }
}

/// Starts a program with every signal unblocked and at its default action, its output discarded.
///
/// Foundation's `Process` passes on the spawning thread's signal mask, and the threads of a test process block
/// almost every signal: a shell started that way never runs its SIGTERM trap. The sandbox harness tears down from
/// such traps, so it is started here instead.
func spawnWithDefaultSignals(_ path: String, _ arguments: [String]) throws -> pid_t {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    guard result == 0 else { throw SupportError("posix_spawn \(path): \(String(cString: strerror(result)))") }
    return pid
}
