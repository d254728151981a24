import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// coalescectl as a person or a script uses it.
@Suite struct CtlTests {
    func ctl(_ arguments: [String]) async throws -> Run {
        try await onThread { try runProcess(BuildProducts.path(of: "coalescectl"), arguments) }
    }

    @Test func statusShowsAlignedColumnsAndJSON() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let human = try await self.ctl(["status", "--socket", daemon.socketPath])
        #expect(human.status == 0)
        let lines = human.stdout.split(separator: "\n")
        #expect(lines.contains("        Version: 0.1.0"))
        #expect(lines.contains { $0.hasPrefix("    Connections: 1 open,") })
        #expect(Set(lines.map { line in line.firstIndex(of: ":").map { line.distance(from: line.startIndex, to: $0) } }).count == 1, "colons align")

        let json = try await self.ctl(["--json", "--socket", daemon.socketPath, "status"])
        #expect(json.status == 0)
        #expect(try JSONParser.parse(json.stdout)["stats"]?["version"] == "0.1.0")
        daemon.signal(SIGKILL)
    }

    @Test func appsMonitorAndTheCommandsThatDriveApps() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let monitor = try WatchedProcess(BuildProducts.path(of: "coalescectl"), ["monitor", "--socket", socket])
            try monitor.waitForLine("Monitoring app transitions; press Ctrl-C to stop.")
            let app = try ExampleApp(socket: socket, name: "org.example.mail")
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            let ctl = BuildProducts.path(of: "coalescectl")
            #expect(try runProcess(ctl, ["deactivate", "--socket", socket]).stdout == "org.example.mail: background\n")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try monitor.waitForLine(containing: "(backgroundWorkDone)")
            let lines = monitor.output.dropFirst().map { $0.split(separator: " ").dropFirst(3).joined(separator: " ") }
            #expect(
                lines == [
                    "org.example.mail: notRunning → inactive (launch)", "org.example.mail: inactive → active (launch)",
                    "org.example.mail: active → inactive (deactivate)",
                    "org.example.mail: inactive → background (deactivate)",
                    "org.example.mail: background → suspended (backgroundWorkDone)",
                ],
                "\(monitor.output)"
            )
            let apps = try runProcess(ctl, ["apps", "--socket", socket]).stdout.split(separator: "\n")
            #expect(apps.first?.split(separator: " ", omittingEmptySubsequences: true) == ["APP", "STATE", "PID", "UNIT", "TASKS", "BADGE", "SINCE"])
            #expect(apps.contains { $0.hasPrefix("org.example.mail") && $0.contains(" suspended ") && $0.contains(" \(app.child.pid) ") })
            let shown = try runProcess(ctl, ["app", "org.example.mail", "--socket", socket]).stdout
            #expect(shown.contains("State: suspended") && shown.contains("PID: \(app.child.pid)"), "\(shown)")
            #expect(try runProcess(ctl, ["activate", "org.example.mail", "--socket", socket]).stdout == "org.example.mail: active\n")
            #expect(try runProcess(ctl, ["interrupt", "begin", "--socket", socket]).stdout == "org.example.mail: inactive\n")
            #expect(try runProcess(ctl, ["interrupt", "end", "--socket", socket]).stdout == "org.example.mail: active\n")
            #expect(try runProcess(ctl, ["terminate", "org.example.mail", "--socket", socket]).stdout == "org.example.mail: notRunning\n")
            let none = try runProcess(ctl, ["purge", "--socket", socket])
            #expect(none.status == 1 && none.stderr.contains("io.coalesced.System.NothingToPurge"))
        }
        daemon.signal(SIGKILL)
    }

    @Test func launchingAnAppWithoutALaunchUnitSaysWhatItWaitsForAndHowLong() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nLaunchTimeoutSec=500ms\n")
        try await onThread { try daemon.waitUntilReady() }
        _ = try await onThread { try testClient(daemon.socketPath).call("io.coalesced.App.Register", ["name": "org.example.mail"]) }
        let launched = try await self.ctl(["launch", "org.example.mail", "--socket", daemon.socketPath])
        #expect(
            launched.stderr.contains("org.example.mail has no launch unit: waiting up to 500ms (LaunchTimeoutSec=) for its process to attach."),
            "\(launched.stderr)"
        )
        #expect(launched.status == 1 && launched.stderr.contains("io.coalesced.System.LaunchTimedOut"), "nothing attached: \(launched.stderr)")
        daemon.signal(SIGKILL)
    }

    @Test func tablesWithoutTheirLegendAndUsageErrorsThatSayWhatIsWrong() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            for name in ["org.example.mail", "org.example.news"] { _ = try client.call("io.coalesced.App.Register", ["name": .string(name)]) }
        }
        let apps = try await self.ctl(["apps", "--no-legend", "--socket", socket])
        #expect(apps.status == 0)
        let lines = apps.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty, "two rows, no header, no summary: \(apps.stdout)")
        #expect(lines.prefix(2).map { $0.split(separator: " ").first } == ["org.example.mail", "org.example.news"])
        let queue = try await self.ctl(["queue", "org.example.mail", "--no-legend", "--socket", socket])
        #expect(queue.status == 0 && queue.stdout.isEmpty, "nothing held, nothing printed: \(queue.stdout)")
        let withLegend = try await self.ctl(["apps", "--socket", socket])
        #expect(withLegend.stdout.hasPrefix("APP ") && withLegend.stdout.hasSuffix("\n2 apps listed.\n"))

        let purge = try await self.ctl(["purge", "--count", "-1", "--socket", socket])
        #expect(purge.status == 64 && purge.stderr.contains("--count must be at least 1"), "\(purge.stderr)")
        let help = try await self.ctl(["post", "--help"])
        #expect(help.stdout.contains("(default: {})") && !help.stdout.contains("(default {})"), "one default, said once: \(help.stdout)")
        daemon.signal(SIGKILL)
    }

    @Test func introspectListsInterfacesAndPrintsTheirText() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let list = try await self.ctl(["introspect", "--socket", daemon.socketPath])
        #expect(
            list.stdout.contains(
                "Interfaces: io.coalesced.App\n            io.coalesced.Notifications\n            io.coalesced.Protocol\n            io.coalesced.Screen\n"
                    + "            io.coalesced.System\n"
                    + "            org.varlink.service"
            )
        )
        let text = try await self.ctl(["introspect", "io.coalesced.System", "--socket", daemon.socketPath])
        #expect(text.stdout.contains("method Stats() -> (stats: DaemonStats)"))
        let missing = try await self.ctl(["introspect", "io.coalesced.Nope", "--socket", daemon.socketPath])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("org.varlink.service.InterfaceNotFound"))
        daemon.signal(SIGKILL)
    }

    @Test func callAnyMethodWithParameters() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let described = try await self.ctl([
            "call", "--json", "--socket", daemon.socketPath,
            "org.varlink.service.GetInterfaceDescription", #"{"interface":"io.coalesced.Protocol"}"#,
        ])
        #expect(described.status == 0)
        #expect(try JSONParser.parse(described.stdout)["description"]?.stringValue?.contains("error MessageTooLarge") == true)
        let wrong = try await self.ctl(["call", "--socket", daemon.socketPath, "io.coalesced.System.Nope"])
        #expect(wrong.status == 1)
        #expect(wrong.stderr == "coalescectl: the daemon answered with an error: org.varlink.service.MethodNotFound {\"method\":\"io.coalesced.System.Nope\"}\n")
        let badJSON = try await self.ctl(["call", "--socket", daemon.socketPath, "io.coalesced.System.Stats", "[1]"])
        #expect(badJSON.status == 64)
        daemon.signal(SIGKILL)
    }

    @Test func unreachableDaemonIsOneLineNamingTheSocketAndWhatAppliesToIt() async throws {
        let directory = try TemporaryDirectory()
        let absent = directory.file("absent.sock")
        let run = try await self.ctl(["status", "--socket", absent])
        #expect(run.status == 69)
        #expect(
            run.stderr == "coalescectl: cannot connect to \(absent): No such file or directory; is coalesced running with "
                + "--socket \(absent)? No daemon serves that path.\n",
            "a socket named on the command line is no unit's: \(run.stderr)"
        )

        // The user instance's socket is the user units'.
        let runtime = try directory.directory("runtime", mode: 0o700)
        let user = try await self.ctl(environment: ["XDG_RUNTIME_DIR": runtime], ["--user", "status"])
        #expect(user.status == 69)
        #expect(
            user.stderr.hasPrefix("coalescectl: cannot connect to \(runtime)/coalesced/io.coalesced: ")
                && user.stderr.contains("Check 'systemctl --user status coalesced.socket coalesced.service'"),
            "\(user.stderr)"
        )
        #expect(user.stderr.split(separator: "\n").count == 1)

        // The system instance's is the system units'. Only where no system daemon runs on this machine.
        if access("/run/coalesced/io.coalesced", F_OK) != 0 {
            let system = try await self.ctl(["--system", "status"])
            #expect(system.status == 69)
            #expect(system.stderr.contains("Check 'systemctl status coalesced.socket coalesced.service'"), "\(system.stderr)")
            #expect(!system.stderr.contains("--user status"))
        }
    }

    @Test func outputFormatsAsJournalctlNamesThem() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        _ = try await onThread { try testClient(socket).call("io.coalesced.App.Register", ["name": "org.example.mail"]) }

        let oneLine = try await self.ctl(["apps", "-o", "json", "--socket", socket])
        #expect(oneLine.status == 0)
        #expect(oneLine.stdout.split(separator: "\n").count == 1, "one line: \(oneLine.stdout)")
        #expect(try JSONParser.parse(oneLine.stdout)["apps"]?.arrayValue?.first?["name"] == "org.example.mail")

        let pretty = try await self.ctl(["--output", "json-pretty", "apps", "--socket", socket])
        #expect(pretty.status == 0)
        #expect(pretty.stdout.split(separator: "\n").count > 3 && pretty.stdout.contains("\n  \"apps\": ["), "\(pretty.stdout)")
        #expect(try JSONParser.parse(pretty.stdout) == JSONParser.parse(oneLine.stdout), "the same reply, indented")

        let table = try await self.ctl(["apps", "-o", "table", "--socket", socket])
        #expect(table.status == 0 && table.stdout.hasPrefix("APP "))
        let short = try await self.ctl(["apps", "--json", "--socket", socket])
        #expect(short.stdout == oneLine.stdout, "--json is -o json")

        let status = try await self.ctl(["status", "-o", "json-pretty", "--socket", socket])
        #expect(try JSONParser.parse(status.stdout)["stats"]?["version"] == "0.1.0")
        let called = try await self.ctl(["call", "-o", "json", "--socket", socket, "io.coalesced.System.ListApps"])
        #expect(called.stdout.split(separator: "\n").count == 1 && called.stdout.contains("org.example.mail"))

        let conflicting = try await self.ctl(["apps", "--json", "-o", "table", "--socket", socket])
        #expect(conflicting.status == 64 && conflicting.stderr.contains("--json is -o json, which excludes -o table"), "\(conflicting.stderr)")
        let unknown = try await self.ctl(["apps", "-o", "yaml", "--socket", socket])
        #expect(unknown.status == 64 && unknown.stderr.contains("Please provide one of 'table', 'json' or 'json-pretty'"), "\(unknown.stderr)")
        daemon.signal(SIGKILL)
    }

    @Test func everySubcommandsHelpShowsTheGlobalOptionsAndEachDefaultOnce() async throws {
        let root = try await self.ctl(["--help"])
        let subcommands = root.stdout.split(separator: "\n").drop { !$0.hasPrefix("SUBCOMMANDS:") }.dropFirst()
            .compactMap { line -> String? in
                // A subcommand's line starts with two spaces; its abstract's continuation lines with more.
                guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else { return nil }
                return String(name)
            }
        #expect(subcommands.count >= 14, "\(root.stdout)")
        for subcommand in subcommands where subcommand != "help" {
            let help = try await self.ctl([subcommand, "--help"])
            #expect(help.status == 0)
            for option in ["--socket <path>", "--user", "--system", "-o, --output <format>", "--json", "--no-legend", "--no-pager"] {
                #expect(help.stdout.contains(option), "\(subcommand) --help shows \(option): \(help.stdout)")
            }
            // Each option's text is the lines from its name to the next one's: it says its default at most once.
            var paragraphs: [String] = []
            for line in help.stdout.split(separator: "\n") {
                if line.hasPrefix("  -") || line.hasPrefix("  <") || paragraphs.isEmpty {
                    paragraphs.append(String(line))
                } else {
                    paragraphs[paragraphs.count - 1] += " " + line.trimmingCharacters(in: .whitespaces)
                }
            }
            for paragraph in paragraphs {
                #expect(paragraph.components(separatedBy: "default").count <= 2, "\(subcommand): one default: \(paragraph)")
            }
        }
    }

    /// coalescectl and coalesced decide a user instance's socket in one place: both refuse, with the same words,
    /// when XDG_RUNTIME_DIR is unset, and both use it when it is set.
    @Test func userInstanceRuntimeDirectoryIsTheSameForTheDaemonAndCoalescectl() async throws {
        let directory = try TemporaryDirectory()
        let daemonRefused = try await onThread {
            try runProcess("/usr/bin/env", [
                "-u", "XDG_RUNTIME_DIR", BuildProducts.path(of: "coalesced"), "--user",
                "--state-dir", directory.file("state"), "--config", directory.file("absent.conf"),
            ])
        }
        let ctlRefused = try await self.ctl(environment: ["XDG_RUNTIME_DIR": nil], ["--user", "status"])
        let reason = "XDG_RUNTIME_DIR is not set, so a user instance has no socket; pass --socket PATH"
        #expect(daemonRefused.status == 64 && daemonRefused.stderr.contains(reason), "\(daemonRefused.stderr)")
        #expect(ctlRefused.status == 64 && ctlRefused.stderr.contains(reason), "\(ctlRefused.stderr)")

        let runtime = try directory.directory("runtime", mode: 0o700)
        try directory.write("coalesced.conf", "")
        var environment = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment[key] = nil
        }
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let daemon = try ChildProcess(
            BuildProducts.path(of: "coalesced"),
            ["--user", "--state-dir", directory.file("state"), "--config", directory.file("coalesced.conf")],
            environment: environment
        )
        try await withBlockingCleanup {
            let socket = runtime + "/coalesced/io.coalesced"
            try await onThread { try waitUntil("the user instance serves \(socket)") { (try? testClient(socket)) != nil } }
            let status = try await self.ctl(environment: ["XDG_RUNTIME_DIR": runtime], ["--user", "status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("Socket: \(socket)"), "\(status.stdout)")
        } cleanup: {
            daemon.signal(SIGKILL)
            _ = daemon.wait()
        }
    }

    /// A pager as systemctl runs one: for a terminal only, and never with --no-pager.
    @Test func longOutputGoesThroughThePagerOnATerminalOnly() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let directory = try TemporaryDirectory()
        let paged = directory.file("paged")
        let ctl = BuildProducts.path(of: "coalescectl")
        let command = "\(ctl) introspect io.coalesced.System --socket \(daemon.socketPath)"
        let pager = ["COALESCECTL_PAGER": "cat > \(paged)", "PAGER": nil]

        // On a terminal (script(1) gives it one), the pager gets the output.
        let onTerminal = try await self.run("/usr/bin/script", ["-qec", command, "/dev/null"], environment: pager)
        #expect(onTerminal.status == 0, "\(onTerminal.stderr)")
        let text = try String(contentsOfFile: paged, encoding: .utf8)
        #expect(text.contains("method Stats() -> (stats: DaemonStats)"), "\(text)")
        #expect(!onTerminal.stdout.contains("method Stats()"), "the output went to the pager, not the terminal")
        try FileManager.default.removeItem(atPath: paged)

        // --no-pager: straight to the terminal.
        let unpaged = try await self.run("/usr/bin/script", ["-qec", command + " --no-pager", "/dev/null"], environment: pager)
        #expect(unpaged.status == 0 && unpaged.stdout.contains("method Stats() -> (stats: DaemonStats)"))
        #expect(!FileManager.default.fileExists(atPath: paged))

        // Not a terminal: no pager.
        let piped = try await self.run(ctl, ["introspect", "io.coalesced.System", "--socket", daemon.socketPath], environment: pager)
        #expect(piped.status == 0 && piped.stdout.contains("method Stats() -> (stats: DaemonStats)"))
        #expect(!FileManager.default.fileExists(atPath: paged))
        daemon.signal(SIGKILL)
    }

    /// The bash completion the argument parser generates completes app names from the running daemon.
    @Test func bashCompletionCompletesAppNamesFromTheDaemon() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            for name in ["org.example.mail", "org.example.maps", "org.example.news"] {
                _ = try client.call("io.coalesced.App.Register", ["name": .string(name)])
            }
        }
        let ctl = BuildProducts.path(of: "coalescectl")
        let completion = try await onThread { try BashCompletion() }
        func complete(_ words: [String]) async throws -> [String] { try await onThread { try completion.complete(words) } }
        #expect(try await complete([ctl, "app", "--socket", socket, "org.example.ma"]) == ["org.example.mail", "org.example.maps"])
        #expect(try await complete([ctl, "--socket", socket, "queue", "org.example.n"]) == ["org.example.news"])
        #expect(try await complete([ctl, "terminate", "--socket", socket, ""]).count == 3)
        daemon.signal(SIGKILL)
    }
}

extension CtlTests {
    /// Runs coalescectl with the test's environment changed: a `nil` value removes the variable.
    func ctl(environment: [String: String?], _ arguments: [String]) async throws -> Run {
        try await self.run(BuildProducts.path(of: "coalescectl"), arguments, environment: environment)
    }

    /// Runs a command with the test's environment changed, through env(1).
    func run(_ path: String, _ arguments: [String], environment: [String: String?]) async throws -> Run {
        // env takes its -u options before the assignments.
        let removed = environment.filter { $0.value == nil }.keys.sorted().flatMap { ["-u", $0] }
        let set = environment.compactMap { key, value in value.map { "\(key)=\($0)" } }.sorted()
        let prefix = removed + set
        return try await onThread { try runProcess("/usr/bin/env", prefix + [path] + arguments) }
    }
}
