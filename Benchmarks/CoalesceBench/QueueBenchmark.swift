import CoalesceTestSupport
import Foundation
import Varlink

/// Durable posts to a suspended app's queue kind that holds 10, 1,000 and 10,000 entries (its bound, so that each
/// post adds one and drops the oldest), against posts to a kind with the latest policy, one slot whatever comes,
/// in the same run.
struct QueueBenchmark {
    /// Posts timed per measurement, pipelined; a tenth of them one at a time.
    var posts: Int
    var held: [Int] = [10, 1_000, 10_000]

    /// About 1 KiB of JSON a post.
    static let payload: JSONValue = ["text": .string(String(repeating: "x", count: 1_000))]

    func run() throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1h\n")
        try daemon.waitUntilReady()
        defer {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }
        let client = try VarlinkClient(path: daemon.socketPath)
        var apps: [(name: String, label: String, policy: JSONValue, fill: Int)] = [("org.bench.latest", "latest kind (baseline)", ["policy": "latest"], 0)]
        for held in self.held {
            apps.append(("org.bench.queue\(held)", "queue kind holding \(held)", ["policy": "queue", "bound": .int(Int64(held))], held))
        }
        for app in apps { _ = try client.call("io.coalesced.App.Register", ["name": .string(app.name), "kinds": ["kind0": app.policy]]) }
        let sleepers = try EventsBenchmark.suspended(apps.map(\.name), socket: daemon.socketPath, client: client)
        defer { sleepers.stop() }
        for app in apps where app.fill > 0 {
            _ = try EventsBenchmark.pipelined(daemon.socketPath, producers: 1, posts: app.fill, payload: Self.payload, target: app.name)
        }
        print("| durable 1 KiB posts to a suspended app's kind | 1 producer pipelined (64 at a time) | one at a time |")
        print("|---|---|---|")
        // Each measured twice, in order and then in reverse: the disk's speed drifts during a run, and the mean of
        // the two cancels a steady drift.
        for app in apps + apps.reversed() {
            let pipelined = try EventsBenchmark.pipelined(daemon.socketPath, producers: 1, posts: self.posts, payload: Self.payload, target: app.name)
            let single = max(1, self.posts / 10)
            let start = ContinuousClock.now
            for _ in 0..<single { try post(client, app.name, "kind0", Self.payload) }
            let oneAtATime = Double(single) / ((ContinuousClock.now - start).milliseconds / 1000)
            print("| \(app.label) | \(Int(pipelined)) posts/s | \(Int(oneAtATime)) posts/s |")
        }
        let queue = try client.call("io.coalesced.System.GetQueue", ["app": .string(apps.last!.name)])["held"]?.arrayValue?.first
        print("")
        print("The last queue kind held \(queue?["count"]?.intValue ?? 0) posts, of which it keeps its bound; RSS \((daemon.residentKiB ?? 0) / 1024) MiB.")
        print("")
    }
}
