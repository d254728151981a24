import Foundation

/// Where `swift build` put the products: beside the running test or benchmark binary.
public enum BuildProducts {
    public static func path(of product: String) -> String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = (executable as NSString).deletingLastPathComponent
        // swift-testing may run from inside an .xctest bundle directory.
        while directory.hasSuffix(".xctest") || directory.contains(".xctest/") {
            directory = (directory as NSString).deletingLastPathComponent
        }
        return directory + "/" + product
    }
}

/// The real `coalesced` binary, started on a socket, state directory and configuration in a temporary directory,
/// with `NOTIFY_SOCKET` pointing at a listener the caller owns.
public final class DaemonProcess: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let notify: NotifyListener
    private var child: ChildProcess!  // set in init
    /// Its socket: in its own directory, or its predecessor's when it was started by ``restarted()``.
    public let socketPath: String
    /// The daemon this one took over from: kept, because its directory holds the socket and the state.
    private let predecessor: DaemonProcess?
    public var configPath: String { self.directory.file("coalesced.conf") }
    public var logPath: String { self.directory.file("daemon.log") }

    /// Starts the daemon; it is not yet ready when this returns (wait for READY=1 on ``notify``).
    /// - Parameters:
    ///   - configuration: the text of coalesced.conf; without a `[Memory]` section, `Pressure=no` is added.
    ///   - environment: added to the test's environment (WATCHDOG_USEC, say).
    ///   - stateFiles: files to put in the state directory before the daemon starts, by name.
    ///   - wrapper: a command that runs the daemon (its path and arguments come after), as `nsenter` to start it in
    ///     another mount namespace; it must exec, so that the daemon keeps its pid.
    public convenience init(
        configuration: String = "",
        environment: [String: String] = [:],
        arguments: [String] = [],
        stateFiles: [String: String] = [:],
        wrapper: [String] = []
    ) throws {
        try self.init(configuration: configuration, environment: environment, arguments: arguments, stateFiles: stateFiles, wrapper: wrapper, continuing: nil)
    }

    private init(
        configuration: String,
        environment: [String: String],
        arguments: [String],
        stateFiles: [String: String],
        wrapper: [String],
        continuing predecessor: DaemonProcess?
    ) throws {
        self.directory = try TemporaryDirectory()
        self.predecessor = predecessor
        self.socketPath = predecessor?.socketPath ?? self.directory.file("io.coalesced")
        for (name, text) in stateFiles { try self.directory.write("state/" + name, text) }
        self.notify = try NotifyListener(path: self.directory.file("notify"))
        // Each daemon that watches /etc/localtime holds an inotify instance, and a whole test run's daemons at once
        // would use up the user's fs.inotify.max_user_instances (and the sandbox's systemd could not boot): the zone
        // is watched only where a test asks for it. And the machine's memory pressure (a parallel build) must not
        // purge a test's suspended apps: a test that follows it says so with a [Memory] section of its own.
        let followsZone = configuration.contains("FollowTimeZone=")
        let followsPressure = configuration.split(separator: "\n").contains { $0.hasPrefix("[Memory]") }
        let text = configuration + (followsZone ? "" : "\n[System]\nFollowTimeZone=no\n")
            + (followsPressure ? "" : "\n[Memory]\nPressure=no\n")
        try self.directory.write("coalesced.conf", text)
        _ = FileManager.default.createFile(atPath: self.directory.file("daemon.log"), contents: nil)
        let arguments = [
            "--socket", self.socketPath,
            "--state-dir", predecessor?.stateDirectory ?? self.directory.file("state"),
            "--config", self.configPath,
        ] + arguments
        var merged = ProcessInfo.processInfo.environment
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"] {
            merged[key] = nil
        }
        merged["NOTIFY_SOCKET"] = self.notify.path
        merged["SWIFT_BACKTRACE"] = "enable=no"
        merged.merge(environment) { _, new in new }
        let log = open(self.logPath, O_WRONLY | O_APPEND | O_CLOEXEC)
        defer { close(log) }
        let command = wrapper + [BuildProducts.path(of: "coalesced")] + arguments
        self.child = try ChildProcess(command[0], Array(command.dropFirst()), environment: merged, output: log)
    }

    deinit {
        self.child.signal(SIGKILL)
        _ = self.child.wait()
    }

    public var pid: Int32 { self.child.pid }

    /// Where it keeps its state (its predecessor's, for a restarted daemon).
    public var stateDirectory: String { self.predecessor?.stateDirectory ?? self.directory.file("state") }

    /// Kills this daemon with SIGKILL, as a crash ends it, and starts another: ``restarted(configuration:endingWith:)``.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func restarted(configuration: String = "") throws -> DaemonProcess {
        try self.restarted(configuration: configuration, endingWith: SIGKILL)
    }

    /// Ends this daemon with `signal` unless it ended already, waits for it to end, and starts another on the same
    /// socket and state directory, with `configuration`; not yet ready when this returns. It blocks: call it off
    /// the test's task (``onThread``).
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func restarted(configuration: String = "", endingWith signal: Int32) throws -> DaemonProcess {
        self.signal(signal)
        guard self.waitForExit() != nil else { throw SupportError("the daemon did not end on signal \(signal); output:\n\(self.output)") }
        return try DaemonProcess(
            configuration: configuration, environment: [:], arguments: [], stateFiles: [:], wrapper: [], continuing: self
        )
    }

    /// ``restarted(configuration:)``, then waits for the new daemon's READY=1. It blocks: call it off the test's task.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func restartedWhenReady(configuration: String = "") throws -> DaemonProcess {
        try self.restartedWhenReady(configuration: configuration, endingWith: SIGKILL)
    }

    /// ``restarted(configuration:endingWith:)``, then waits for the new daemon's READY=1. It blocks: call it off the
    /// test's task.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func restartedWhenReady(configuration: String = "", endingWith signal: Int32) throws -> DaemonProcess {
        let next = try self.restarted(configuration: configuration, endingWith: signal)
        try next.waitUntilReady()
        return next
    }

    /// Waits for READY=1, failing with the daemon's output when it does not come.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitUntilReady(timeout: Duration = .seconds(30)) throws {
        guard self.notify.waitFor("READY=1", timeout: timeout) != nil else {
            throw SupportError("no READY=1 within \(timeout); daemon output:\n\(self.output)")
        }
    }

    public func signal(_ signal: Int32) {
        self.child.signal(signal)
    }

    /// Waits for the process to exit, at most `timeout`; its status, or `nil` if it is still running.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitForExit(timeout: Duration = .seconds(20)) -> Int32? {
        self.child.wait(timeout: timeout)
    }

    /// What the daemon wrote to stdout and stderr so far.
    public var output: String {
        (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
    }

    /// Resident memory of the process in KiB, from /proc.
    public var residentKiB: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(self.pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line?.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }
}
