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
    private var boot: ChildProcess?
    /// The sandboxed systemd's pid on the host.
    public private(set) var pid: Int32 = 0

    /// Whether the sandbox can run here: it needs root.
    public static var isAvailable: Bool { geteuid() == 0 }

    /// Boots one; blocks until it is up. Prefer ``withSystemdSandbox(binaries:_:)``; whoever calls this calls
    /// ``stop()``.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public init(binaries: [String]) throws {
        self.directory = try TemporaryDirectory()
        self.boot = try ChildProcess(
            "/bin/bash",
            [Self.script, "boot", self.directory.path, "--timeout", "600"]
                + binaries.flatMap { ["--bin", BuildProducts.path(of: $0)] }
        )
        do {
            let waited = try Self.script(["wait", self.directory.path, "--timeout", "60"])
            guard waited.status == 0 else {
                throw SupportError("the systemd sandbox did not boot: \(waited.stderr)")
            }
            // Gone again when the boot tore the sandbox down right after it came up: its log says why.
            guard let pidText = try? String(contentsOfFile: self.directory.file("pid"), encoding: .utf8) else {
                let log = (try? String(contentsOfFile: self.directory.file("boot.log"), encoding: .utf8)) ?? ""
                throw CameUpAndWent(
                    description: "the systemd sandbox came up and went: no \(self.directory.file("pid")); boot.log ends:\n"
                        + log.split(separator: "\n").suffix(20).joined(separator: "\n")
                )
            }
            guard let pid = Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw SupportError("no pid from the sandbox: \(pidText)")
            }
            self.pid = pid
        } catch {
            self.stop()
            throw error
        }
    }

    /// The sandbox's systemd exited right after it was started, before anything of a test ran. It happens now and then
    /// on this machine, for a reason its boot log has not shown yet.
    public struct CameUpAndWent: Error, CustomStringConvertible {
        public var description: String
    }

    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func stop() {
        // The harness reports its own failures in boot.log; the test has nothing better to do with them.
        _ = try? Self.script(["stop", self.directory.path, "--timeout", "30"])
        _ = self.boot?.wait()
    }

    /// Runs a command inside the sandbox (its mount and pid namespaces).
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func run(_ arguments: String...) throws -> Run {
        try self.run(arguments)
    }

    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func run(_ arguments: [String]) throws -> Run {
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

    /// Installs the repository's system units into the sandbox's /run/systemd/system and reloads systemd. Unless
    /// the test wrote /etc/coalesced/coalesced.conf first, the daemon gets one with `[Memory] Pressure=no`: PSI counts
    /// the whole machine, and a parallel test's memory pressure must not purge this test's suspended apps.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func installUnits(dropIns: [String: String] = [:]) throws {
        if !FileManager.default.fileExists(atPath: "/proc/\(self.pid)/root/etc/coalesced/coalesced.conf") {
            try self.write("/etc/coalesced/coalesced.conf", "[Memory]\nPressure=no\n")
        }
        for unit in ["coalesced.service", "coalesced.socket"] {
            let text = try String(contentsOfFile: Self.repository + "/systemd/" + unit, encoding: .utf8)
            try self.write("/run/systemd/system/" + unit, text)
        }
        for (path, text) in dropIns {
            try self.write("/run/systemd/system/" + path, text)
        }
        try self.run("systemctl", "daemon-reload")
    }

    /// Makes `systemctl suspend` safe and possible inside the sandbox, as FIELD-NOTES.md says: systemd-suspend.service
    /// sleeps `seconds` instead of suspending (checked with `systemctl cat` before this returns), logind sees a
    /// /sys/power/state that offers `mem` (a file bind-mounted over it in the sandbox's mount namespace), and logind
    /// is restarted to read it, with `logindSettings` (such as `InhibitDelayMaxSec=2`) in a drop-in. Throws unless
    /// logind then says CanSuspend=yes. Never suspends anything.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func allowSuspend(sleeping seconds: Int, logindSettings: String = "") throws {
        try self.write(
            "/run/systemd/system/systemd-suspend.service.d/sandbox.conf",
            "[Service]\nExecStart=\nExecStart=/bin/sleep \(seconds)\n"
        )
        try self.write("/run/systemd/logind.conf.d/sandbox.conf", "[Login]\n" + logindSettings + "\n")
        try self.write("/run/sandbox-power-state", "freeze mem\n")
        try self.run("systemctl", "daemon-reload")
        let unit = try self.run("systemctl", "cat", "systemd-suspend.service").stdout
        guard unit.contains("ExecStart=/bin/sleep \(seconds)") else {
            throw SupportError("the systemd-suspend.service override is not loaded; not suspending:\n\(unit)")
        }
        let mounted = try self.run("mount", "-n", "--bind", "/run/sandbox-power-state", "/sys/power/state")
        guard mounted.status == 0 else { throw SupportError("cannot bind /sys/power/state: \(mounted.stderr)") }
        try self.run("systemctl", "restart", "systemd-logind.service")
        let can = try self.run("busctl", "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "CanSuspend")
        guard can.stdout.contains("\"yes\"") else { throw SupportError("logind cannot suspend in the sandbox: \(can.stdout)\(can.stderr)") }
    }

    /// Writes a unit that runs the example app `app` (`coalesce-example`, among the sandbox's binaries) with `unit`
    /// as its launch unit; `arguments` go on its command line, `serviceLines` in its [Service] section. Reload
    /// systemd after the last one.
    public func writeExampleAppUnit(_ unit: String, app: String, arguments: String = "", serviceLines: String = "") throws {
        try self.write(
            "/run/systemd/system/" + unit,
            """
            [Unit]
            Description=The example app \(app), launched by coalesced

            [Service]
            ExecStart=/usr/local/bin/coalesce-example --socket /run/coalesced/io.coalesced --name \(app) --launch-unit \(unit) \(arguments)
            \(serviceLines)

            """
        )
    }

    /// Registers `app` with the running daemon, `unit` its launch unit; throws with coalescectl's error if refused.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func registerApp(_ app: String, launchUnit unit: String) throws {
        let registered = try self.run(
            "coalescectl", "call", "io.coalesced.App.Register", #"{"name":"\#(app)","launchUnit":"\#(unit)"}"#
        )
        guard registered.status == 0 else { throw SupportError("cannot register \(app): \(registered.stderr)") }
    }

    /// What a unit wrote to the journal, line by line.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func output(ofUnit unit: String) throws -> [Substring] {
        try self.run("journalctl", "-o", "cat", "-u", unit).stdout.split(separator: "\n")
    }

    /// The callbacks the example app in `unit` reported, in order (its `callback NAME …` lines).
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func callbacks(ofUnit unit: String) throws -> [String] {
        try self.output(ofUnit: unit).filter { $0.hasPrefix("callback ") }.map { String($0.split(separator: " ")[1]) }
    }

    /// A unit property, as `systemctl show -p NAME --value` prints it.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func property(_ unit: String, _ name: String) throws -> String {
        try self.run("systemctl", "show", "-p", name, "--value", unit).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
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
        let sandbox: SystemdSandbox
        do {
            sandbox = try SystemdSandbox(binaries: binaries)
        } catch let lost as SystemdSandbox.CameUpAndWent {
            // Nothing of the test has run: it gets a sandbox booted again, and the first boot's log is kept in the
            // test's output.
            print("withSystemdSandbox: booting again after \(lost)")
            sandbox = try SystemdSandbox(binaries: binaries)
        }
        defer { sandbox.stop() }
        return try body(sandbox)
    }
}

