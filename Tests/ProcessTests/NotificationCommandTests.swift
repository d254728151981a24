import CoalesceTestSupport
import Foundation
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// `[Notifications] Command=` bounded by `CommandTimeoutSec=` and `MaxCommands=` as a whole: each command is a
/// process group, killed whole at its timeout, which holds its place until nothing of it is left, and whose
/// processes the daemon reaps (none goes to init, none stays a zombie).
@Suite struct NotificationCommandTests {
    static let app = "org.example.reminders"

    /// Where the commands write what they started.
    let log: TemporaryDirectory
    /// In the arguments of every process the commands start (a `sleep` of 1004 seconds and a fraction unique to
    /// the test), to find them in /proc.
    let marker: String

    init() throws {
        self.log = try TemporaryDirectory()
        self.marker = "1004.\(UInt32.random(in: 100_000...999_999))"
    }

    func daemon(command: String, maxCommands: Int) throws -> DaemonProcess {
        let daemon = try DaemonProcess(
            configuration: """
                [Notifications]
                Command=\(command)
                CommandTimeoutSec=2
                MaxCommands=\(maxCommands)
                """
        )
        try daemon.waitUntilReady()
        return daemon
    }

    /// Lines of a file the commands append to, each split into its fields.
    func lines(_ name: String) -> [[String]] {
        let text = (try? String(contentsOfFile: self.log.file(name), encoding: .utf8)) ?? ""
        // A line is written whole, but check: a line cut short is left out.
        return text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.filter { $0.count >= 2 }
    }

    /// Schedules immediate notifications `ids`, each presented at once through the command; `registering` the
    /// app first.
    static func scheduleNow(_ daemon: DaemonProcess, _ ids: [String], registering: Bool = true) throws {
        let client = try testClient(daemon.socketPath)
        if registering { _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)]) }
        for id in ids {
            _ = try client.call(
                "io.coalesced.Notifications.Schedule",
                ["app": .string(Self.app), "request": ["id": .string(id), "content": ["title": .string(id)]]]
            )
        }
    }

    /// A process as /proc shows it.
    struct ListedProcess: CustomStringConvertible {
        var pid: Int32
        var state: Character
        var parent: Int32
        var group: Int32
        /// Its arguments joined by spaces; empty for a zombie.
        var arguments: String
        /// Its `COALESCED_NOTIFICATION`; `nil` for a zombie.
        var notification: String?

        var description: String { "\(self.pid) (\(self.state), parent \(self.parent), group \(self.group)) \(self.arguments)" }
    }

    /// Every process on the machine that /proc shows now.
    static func processes() -> [ListedProcess] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> ListedProcess? in
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return nil }
            // After the command name (which may hold spaces): state, parent, process group.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 2, let state = fields[0].first, let parent = Int32(fields[1]), let group = Int32(fields[2])
            else { return nil }
            let arguments = (FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data())
                .split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
            let environment = (FileManager.default.contents(atPath: "/proc/\(pid)/environ") ?? Data()).split(separator: 0)
            let notification = environment.lazy.map { String(decoding: $0, as: UTF8.self) }
                .first { $0.hasPrefix("COALESCED_NOTIFICATION=") }?.dropFirst("COALESCED_NOTIFICATION=".count)
            return ListedProcess(
                pid: pid, state: state, parent: parent, group: group, arguments: arguments, notification: notification.map(String.init)
            )
        }
    }

    /// What is left of the commands: a process with the marker in its arguments, one the commands recorded, one in
    /// a command's group, or a zombie the daemon has not reaped.
    func leftovers(_ daemon: DaemonProcess, pids: Set<Int32>, groups: Set<Int32>) -> [ListedProcess] {
        Self.processes().filter {
            $0.arguments.contains(self.marker) || pids.contains($0.pid) || groups.contains($0.group)
                || ($0.parent == daemon.pid && $0.state == "Z")
        }
    }

    /// Kills whatever a failing test left running.
    func killLeftovers() {
        for process in Self.processes() where process.arguments.contains(self.marker) { kill(process.pid, SIGKILL) }
    }

    @Test func theTimeoutKillsAllACommandStartedAndNoMoreThanMaxCommandsRunAtOnce() async throws {
        defer { self.killLeftovers() }
        // Each command records its shell's pid and process group, then starts a sleep in the background (recorded),
        // a shell that stops itself, and a sleep in the foreground: all of it outlives the timeout.
        let command = [
            "echo \"$COALESCED_NOTIFICATION $$ $(cut -d' ' -f5 /proc/$$/stat)\" >> \(self.log.file("started.log"));",
            "sleep \(self.marker) & echo \"$COALESCED_NOTIFICATION $!\" >> \(self.log.file("pids.log"));",
            "sh -c 'kill -STOP $$' \(self.marker) &",
            "sleep \(self.marker)",
        ].joined(separator: " ")
        let daemon = try await onThread { try self.daemon(command: command, maxCommands: 2) }
        let ids = ["n1", "n2", "n3", "n4"]
        try await onThread {
            try Self.scheduleNow(daemon, ids)
            var mostAtOnce = 0
            var seenAtOnce: [ListedProcess] = []
            var left: [ListedProcess] = []
            let finished = Result {
                try waitUntil(
                    "all four commands to run and be gone, with all they started (left: \(left), daemon: \(daemon.output))",
                    timeout: .seconds(20),
                    poll: .milliseconds(50)
                ) {
                    let alive = Self.processes().filter { $0.arguments.contains(self.marker) && $0.state != "Z" }
                    let commands = Set(alive.compactMap(\.notification))
                    if commands.count > mostAtOnce {
                        mostAtOnce = commands.count
                        seenAtOnce = alive
                    }
                    let started = self.lines("started.log")
                    guard Set(started.map { $0[0] }) == Set(ids) else { return false }
                    let pids = Set((started.map { $0[1] } + self.lines("pids.log").map { $0[1] }).compactMap { Int32($0) })
                    // Without a group of its own, a command would be in the daemon's: that one is not the command's.
                    let groups = Set(started.compactMap { $0.count > 2 ? Int32($0[2]) : nil }).subtracting([getpgid(daemon.pid)])
                    left = self.leftovers(daemon, pids: pids, groups: groups)
                    return left.isEmpty
                }
            }
            #expect(mostAtOnce <= 2, "at most MaxCommands=2 commands have processes at once: \(seenAtOnce)")
            try finished.get()
            for line in self.lines("started.log") {
                #expect(line.count > 2 && line[1] == line[2], "the command's shell leads a process group of its own: \(line)")
            }
            try waitUntil("each command to be logged as killed") {
                daemon.output.components(separatedBy: "Notification command killed after").count - 1 == ids.count
            }
        }
        daemon.signal(SIGKILL)
    }

    @Test func aCommandWhoseShellExitsAtOnceHoldsItsPlaceUntilWhatItLeftIsKilled() async throws {
        defer { self.killLeftovers() }
        // The shell starts a sleep in the background, records it and exits at once.
        let command = [
            "echo \"$COALESCED_NOTIFICATION $(date +%s.%N)\" >> \(self.log.file("started.log"))",
            "sleep \(self.marker) & echo \"$COALESCED_NOTIFICATION $!\" >> \(self.log.file("pids.log"))",
        ].joined(separator: "; ")
        let daemon = try await onThread { try self.daemon(command: command, maxCommands: 1) }
        try await onThread {
            try Self.scheduleNow(daemon, ["n1", "n2"])
            let first = try waitUntil("the first command to start its sleep") {
                self.lines("pids.log").first { $0[0] == "n1" }.flatMap { Int32($0[1]) }
            }
            // The second command starts only once the first's sleep is gone, killed at the first's timeout.
            var overlapped: [ListedProcess] = []
            try waitUntil("the second command to start", timeout: .seconds(30), poll: .milliseconds(20)) {
                guard self.lines("started.log").contains(where: { $0[0] == "n2" }) else { return false }
                overlapped = Self.processes().filter { $0.pid == first }
                return true
            }
            #expect(overlapped.isEmpty, "the first command's sleep is gone before the second starts: \(overlapped)")
            let started = Dictionary(self.lines("started.log").map { ($0[0], Double($0[1]) ?? 0) }, uniquingKeysWith: { first, _ in first })
            #expect((started["n2"] ?? 0) - (started["n1"] ?? 0) > 1.5, "the first holds its place for its timeout: \(started)")
            try waitUntil("both commands to be gone, with all they started", timeout: .seconds(30), poll: .milliseconds(50)) {
                let pids = Set(self.lines("pids.log").compactMap { Int32($0[1]) })
                return pids.count == 2 && self.leftovers(daemon, pids: pids, groups: []).isEmpty
            }
            #expect(daemon.output.components(separatedBy: "Notification command killed after").count - 1 == 2)
        }
        daemon.signal(SIGKILL)
    }

    @Test func aProcessThatLeavesItsCommandsGroupComesBackToTheDaemonAndIsReaped() async throws {
        defer { self.killLeftovers() }
        // The first command starts a short sleep in a session of its own and exits at once; the sleep outlives it.
        let short = "0.\(self.marker.dropFirst(5))"
        let command = [
            "echo \"$COALESCED_NOTIFICATION $$\" >> \(self.log.file("started.log"));",
            "if [ \"$COALESCED_NOTIFICATION\" = n1 ]; then setsid sleep \(short) & echo \"n1 $!\" >> \(self.log.file("pids.log")); fi",
        ].joined(separator: " ")
        let daemon = try await onThread { try self.daemon(command: command, maxCommands: 1) }
        try await onThread {
            try Self.scheduleNow(daemon, ["n1"])
            let escaped = try waitUntil("the first command to start its sleep") {
                self.lines("pids.log").first { $0[0] == "n1" }.flatMap { Int32($0[1]) }
            }
            // Its shell gone, the sleep is the daemon's child, not init's; ended, it waits to be reaped.
            let ended = try waitUntil("the sleep to end") { () -> ListedProcess?? in
                let process = Self.processes().first { $0.pid == escaped }
                return process == nil || process?.state == "Z" ? .some(process) : nil
            }
            #expect(ended == nil || ended?.parent == daemon.pid, "the sleep came back to the daemon: \(String(describing: ended))")
            // The next command's end reaps it.
            try Self.scheduleNow(daemon, ["n2"], registering: false)
            try waitUntil("the second command to run") { self.lines("started.log").contains { $0[0] == "n2" } }
            try waitUntil("the sleep to be reaped") { !Self.processes().contains { $0.pid == escaped } }
        }
        daemon.signal(SIGKILL)
    }
}
