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
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
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
            #expect(apps.first?.split(separator: " ", omittingEmptySubsequences: true) == ["APP", "STATE", "PID", "UNIT", "TASKS", "SINCE"])
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
                "Interfaces: io.coalesced.App\n            io.coalesced.Protocol\n            io.coalesced.System\n"
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

    @Test func unreachableDaemonIsOneLineNamingTheSocket() async throws {
        let directory = try TemporaryDirectory()
        let run = try await self.ctl(["status", "--socket", directory.file("absent.sock")])
        #expect(run.status == 69)
        #expect(run.stderr.hasPrefix("coalescectl: cannot connect to \(directory.file("absent.sock")): No such file or directory; is coalesced running?"))
        #expect(run.stderr.split(separator: "\n").count == 1)
    }
}
