import CoalesceTestSupport
import Foundation
import Varlink

/// How long the daemon holds a sleep back: from logind's PrepareForSleep(true) to the daemon closing its delay
/// inhibitor (the journal's COALESCED_PREPARATION_MS), with 0 (the baseline: no app to tell), 1, 100 and 1,000
/// apps running and attached, the last one active and acknowledging its willResignActive. Under the sandbox's real
/// systemd and logind, with systemd-suspend.service sleeping a second instead of suspending. Needs root.
struct SleepBenchmark {
    var appCounts = [0, 1, 100, 1000]
    var rounds = 5

    func run() throws {
        guard SystemdSandbox.isAvailable else {
            print("sleep: skipped, the sandbox needs root\n")
            return
        }
        print("| sleep: PrepareForSleep(true) to the inhibitor released | median | max |")
        print("|---|---|---|")
        for count in self.appCounts {
            let figures = try self.measure(apps: count)
            let sorted = figures.sorted()
            let label = count == 0 ? "no app (baseline)" : "\(count) running \(count == 1 ? "app" : "apps"), the last active"
            print("| \(label), \(sorted.count) sleeps | \(sorted[sorted.count / 2]) ms | \(sorted.last ?? 0) ms |")
        }
        print("")
    }

    private func measure(apps count: Int) throws -> [Int] {
        let sandbox = try SystemdSandbox(binaries: ["coalesced", "coalescectl"])
        defer { sandbox.stop() }
        try sandbox.write(
            "/etc/coalesced/coalesced.conf",
            "[Daemon]\nLogLevel=notice\n[Apps]\nAcknowledgeTimeoutSec=1h\nBackgroundTaskBudgetSec=infinity\n[Varlink]\nMaxConnectionsPerUser=4096\n[Memory]\nPressure=no\n"
        )
        try sandbox.installUnits()
        try sandbox.allowSuspend(sleeping: 1)
        guard try sandbox.run("systemctl", "start", "coalesced.service").status == 0 else {
            throw SupportError("coalesced did not start in the sandbox")
        }
        let socket = "/proc/\(sandbox.pid)/root/run/coalesced/io.coalesced"
        let client = try VarlinkClient(path: socket)
        let names = (0..<count).map { "org.bench.sleep\($0)" }
        var streams: [VarlinkClient] = []
        for name in names {
            _ = try client.call("io.coalesced.App.Register", ["name": .string(name)])
            let stream = try VarlinkClient(path: socket)
            try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(name)], more: true))
            _ = try stream.receiveReply()
            streams.append(stream)
        }
        let drain = try StreamDrain(streams, acknowledging: names)
        defer { drain.stop() }
        try waitUntil("the inhibitor", timeout: .seconds(20), poll: .milliseconds(100)) {
            try sandbox.run("systemd-inhibit", "--list", "--no-pager").stdout.contains("coalesced")
        }
        var figures: [Int] = []
        for round in 1...self.rounds {
            guard try sandbox.run("systemctl", "suspend").status == 0 else { throw SupportError("systemctl suspend failed") }
            try waitUntil("wake \(round)", timeout: .seconds(30), poll: .milliseconds(50)) {
                try self.entries(sandbox, "f771fdfbbc4c4558a8ac2b6fad83658e").count >= round
            }
            try waitUntil("the inhibitor again", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.run("systemd-inhibit", "--list", "--no-pager").stdout.contains("coalesced")
            }
        }
        for entry in try self.entries(sandbox, "58a0ba871fb04ef9a44b5766ccd7da89") {
            guard let text = entry["COALESCED_PREPARATION_MS"]?.stringValue, let value = Int(text) else { continue }
            if entry["COALESCED_LATE"] != nil { throw SupportError("an app was late: \(entry)") }
            figures.append(value)
        }
        guard figures.count == self.rounds else { throw SupportError("\(figures.count) sleep entries for \(self.rounds) sleeps") }
        return figures
    }

    private func entries(_ sandbox: SystemdSandbox, _ messageID: String) throws -> [JSONValue] {
        try sandbox.run(
            "journalctl", "-o", "json", "--output-fields=COALESCED_PREPARATION_MS,COALESCED_LATE", "MESSAGE_ID=\(messageID)"
        ).stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    }
}
