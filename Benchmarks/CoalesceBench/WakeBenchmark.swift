import CoalesceTestSupport
import Foundation
import Varlink

/// A wake for an event: from the Post of a kind declared `wakes: background` to the event read by a suspended app
/// whose process is stopped (SIGSTOP the moment it is suspended), beside a post of the same kind to the same app
/// while it runs (active), in the same run. The app is the example app, a real process that reads and acknowledges
/// each event; the time ends when its line for the event is read. A wake adds the wake's decision, the SIGCONT and
/// the held event's delivery; both include the post's write to disk.
struct WakeBenchmark {
    var rounds: Int
    static let app = "org.bench.wake"

    func run() throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nSuspensionDelaySec=0\nAcknowledgeTimeoutSec=1h\n")
        try daemon.waitUntilReady()
        defer {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }
        let client = try VarlinkClient(path: daemon.socketPath)
        let kinds: JSONValue = ["bench.wake": ["policy": "latest", "wakes": "background"]]
        _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app), "kinds": kinds])
        let app = try ExampleApp(socket: daemon.socketPath, name: Self.app)
        defer { app.kill() }
        _ = try app.nextCallbacks(2)
        var seen = 0
        func postAndRead() throws -> Double {
            let start = ContinuousClock.now
            _ = try post(client, Self.app, "bench.wake", ["n": .int(Int64(seen))])
            seen += 1
            _ = try app.events(atLeast: seen)
            return (ContinuousClock.now - start).microseconds
        }

        var running: [Double] = []
        for _ in 0..<self.rounds { running.append(try postAndRead()) }
        _ = try client.call("io.coalesced.System.Deactivate", ["app": .string(Self.app)])
        _ = try app.nextCallbacks(2)
        var woken: [Double] = []
        for _ in 0..<self.rounds {
            try waitForApp(client, Self.app, "state", "suspended", timeout: .seconds(60))
            try waitUntil("the app's process to be stopped", poll: .milliseconds(1)) { Self.stopped(app.child.pid) }
            woken.append(try postAndRead())
        }
        running.sort()
        woken.sort()
        print("| \(self.rounds) posts of a kind that wakes, to the example app | p50 | p99 |")
        print("|---|---|---|")
        print("| running (active): Post to the event read (baseline) | \(Self.format(running.percentile(0.5))) µs | \(Self.format(running.percentile(0.99))) µs |")
        print("| suspended and stopped: Post to the event read, through the wake | \(Self.format(woken.percentile(0.5))) µs | \(Self.format(woken.percentile(0.99))) µs |")
        print("")
    }

    /// Whether the kernel says the process is stopped by a signal (`T` in /proc/PID/stat).
    static func stopped(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = stat.lastIndex(of: ")") else {
            return false
        }
        return stat[stat.index(end, offsetBy: 2)...].first == "T"
    }

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }
}
