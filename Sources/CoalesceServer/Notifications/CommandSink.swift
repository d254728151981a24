import CSystemd
import Foundation
import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

/// `[Notifications] Command=`: a command run for each presentation, through `/bin/sh -c`, with the notification's
/// fields in its environment. At most `MaxCommands=` run at once; the others wait their turn, up to a bound past
/// which they are dropped and logged (the journal has every presentation regardless). One that runs longer than
/// `CommandTimeoutSec=` is killed, and logged.
final class CommandSink: Sendable {
    struct Run: Sendable {
        var command: String
        var environment: [String: String]
        var timeout: Duration
    }

    private struct State {
        var running = 0
        var waiting: [Run] = []
    }

    /// Presentations waiting for a command past this are dropped, and logged.
    static let waitingBound = 1024

    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Runs `run` now, or once a running command ends when `limit` already run.
    func submit(_ run: Run, limit: Int) {
        enum Outcome { case start, waits, dropped }
        let outcome = self.state.withLock { state -> Outcome in
            if state.running < limit {
                state.running += 1
                return .start
            }
            guard state.waiting.count < Self.waitingBound else { return .dropped }
            state.waiting.append(run)
            return .waits
        }
        switch outcome {
        case .start: Thread.detachNewThread { self.runAll(first: run) }
        case .waits: break
        case .dropped:
            self.logger.warning(
                "Notification command not run: \(Self.waitingBound) presentations already wait for one",
                metadata: ["app": "\(run.environment["COALESCED_APP"] ?? "")", "notification": "\(run.environment["COALESCED_NOTIFICATION"] ?? "")"]
            )
        }
    }

    /// Runs `first`, then whatever waits, on this thread, until nothing does.
    private func runAll(first: Run) {
        var next: Run? = first
        while let run = next {
            self.execute(run)
            next = self.state.withLock { state in
                if state.waiting.isEmpty {
                    state.running -= 1
                    return nil
                }
                return state.waiting.removeFirst()
            }
        }
    }

    /// Spawns the command and waits for it, killing it at its timeout.
    private func execute(_ run: Run) {
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in run.environment { environment[key] = value }
        let arguments = ["/bin/sh", "-c", run.command]
        let pid: pid_t
        do {
            pid = try Self.spawn(arguments, environment: environment)
        } catch {
            self.logger.error("Cannot run the notification command: \(error)", metadata: ["command": "\(run.command)"])
            return
        }
        let pidfd = pidfd_open(pid, 0)
        var timedOut = false
        if pidfd >= 0 {
            var descriptor = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: run.timeout.components.seconds * 1000 + run.timeout.components.attoseconds / 1_000_000_000_000_000)
            var ready: CInt
            repeat { ready = poll(&descriptor, 1, milliseconds) } while ready < 0 && errno == EINTR
            if ready == 0 {
                timedOut = true
                kill(pid, SIGKILL)
            }
            close(pidfd)
        }
        var status: CInt = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        if timedOut {
            self.logger.warning(
                "Notification command killed after \(run.timeout)", metadata: ["command": "\(run.command)", "timeout": "\(run.timeout)"]
            )
        } else if !exited || code != 0 {
            self.logger.warning(
                "Notification command failed",
                metadata: ["command": "\(run.command)", "status": "\(exited ? "exit \(code)" : "signal \(status & 0x7f)")"]
            )
        }
    }

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    /// posix_spawn with stdin from /dev/null, no descriptor of the daemon's but stdout and stderr, and a cleared
    /// signal mask.
    private static func spawn(_ arguments: [String], environment: [String: String]) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        _ = closeFromAction(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(description: "\(arguments[0]): \(String(cString: strerror(result)))") }
        return pid
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not export.
private let closeFromAction: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
        return { _, _ in 0 }
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
}()
