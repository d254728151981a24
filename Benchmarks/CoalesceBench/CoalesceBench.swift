import ArgumentParser
import CoalesceTestSupport
import Foundation
import Varlink

/// Measures the daemon as a user meets it: how fast it is ready, what it holds idle, and what a Varlink round trip
/// costs next to a bare Unix-socket echo measured by the same client code in the same run.
@main
struct CoalesceBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalesced-bench",
        abstract: "Benchmark coalesced: start-up, idle memory, Varlink round trips against a bare socket echo.",
        subcommands: [ScreenBenchmark.self, RefreshSlotsBenchmark.self]
    )

    @Option(help: "How many times to start the daemon.")
    var starts = 20

    @Option(help: "Round trips per measurement.")
    var calls = 50_000

    @Option(help: "Apps registered and attached for the transitions measurement.")
    var apps = 1_000

    @Option(help: "Activate calls per transitions measurement.")
    var activations = 20_000

    @Option(help: "Apps in the registry for the memory measurement.")
    var registered = 10_000

    @Option(help: "Posts per throughput measurement.")
    var posts = 50_000

    @Option(help: "Posts held for the wake measurements (one per value, each with its own app).")
    var wakePosts: [Int] = [10_000, 1_000_000]

    @Option(help: "Suspended apps for the memory measurement of events.")
    var suspendedApps = 1_000

    @Option(help: "Posts for the memory measurement of events (RSS after each total).")
    var memoryPosts: [Int] = [100_000, 1_000_000]

    @Option(help: "Starts measured on each store (empty, filled to the quotas) by the store part.")
    var storeStarts = 5

    @Option(help: "Pending notification requests for the notifications part, spread over --notification-apps apps.")
    var notificationsPending = 100_000

    @Option(help: "Apps holding the notifications part's requests.")
    var notificationApps = 1_000

    @Option(help: "Notification requests due in the same second, for the lateness measurement.")
    var notificationsBurst = 10_000

    @Option(help: "Notification requests spread over --notifications-spread-seconds, for the lateness measurement.")
    var notificationsSpread = 6_000

    @Option(help: "Seconds the spread notification requests come due over.")
    var notificationsSpreadSeconds = 60

    @Option(help: "Rounds of the pressure part.")
    var pressureRounds = 5

    @Option(help: "Posts timed by the wake part, to the running app and through a wake each.")
    var wakeRounds = 500

    @Option(help: "Which parts to run: daemon (start-up, round trips), lifecycle, events, queue (posts to queue kinds holding many entries), store (start-up and wake with the store filled to the quotas), notifications (Schedule rate, memory and start-up with many pending, lateness of presentations), pressure (real memory pressure to the first purge; needs root and a memory cgroup), sleep (how long a sleep is held back with 0, 1, 100 and 1,000 apps running; root, the systemd sandbox), wake (Post to the event read by a suspended, stopped app woken for it, beside the same app running).")
    var parts: [String] = ["daemon", "lifecycle", "events", "queue", "store", "notifications", "pressure", "sleep", "wake"]

    @Option(help: "Instead of the parts: post --posts events, pipelined from one producer, to a daemon already serving this socket (to profile it, say under callgrind), and print the rate.")
    var load: String?

    @Flag(help: "With --load: post to a volatile kind.")
    var volatile = false

    @Flag(help: "With --load: time --posts single posts' round trips to an attached app that acknowledges each event, instead of pipelining.")
    var roundTrip = false

    func run() throws {
        let binary = BuildProducts.path(of: "coalesced")
        print("coalesced-bench: \(binary)")
        print("")
        raiseDescriptorLimit()
        if let socket = self.load {
            let mode = self.volatile ? "volatile" : "durable"
            if self.roundTrip {
                let kinds: JSONValue = self.volatile ? ["bench": ["policy": "latest", "volatile": true]] : [:]
                let trips = try EventsBenchmark.roundTrip(
                    socket, app: "org.bench.active", kinds: kinds, count: self.posts, payload: EventsBenchmark.payload
                )
                print("\(self.posts) round trips (\(mode)): p50 \(EventsBenchmark.format(trips.p50)) µs, p99 \(EventsBenchmark.format(trips.p99)) µs")
                return
            }
            let client = try VarlinkClient(path: socket)
            let kinds: JSONValue = self.volatile ? ["kind0": ["policy": "latest", "volatile": true]] : [:]
            for index in 0..<4 {
                _ = try client.call("io.coalesced.App.Register", ["name": .string("org.bench.target\(index)"), "kinds": kinds])
            }
            let rate = try EventsBenchmark.pipelined(socket, producers: 1, posts: self.posts, payload: EventsBenchmark.payload)
            print("\(self.posts) posts (\(mode)), 1 producer pipelined: \(Int(rate)) posts/s")
            return
        }
        if self.parts.contains("daemon") { try self.measureDaemon() }
        if self.parts.contains("lifecycle") { try self.measureLifecycle() }
        if self.parts.contains("queue") { try QueueBenchmark(posts: self.posts).run() }
        if self.parts.contains("events") {
            try EventsBenchmark(
                posts: self.posts,
                wakePosts: self.wakePosts,
                suspendedApps: self.suspendedApps,
                memoryPosts: self.memoryPosts
            ).run()
        }
        if self.parts.contains("store") { try StoreBenchmark(starts: self.storeStarts).run() }
        if self.parts.contains("pressure") { try PressureBenchmark(rounds: self.pressureRounds).run() }
        if self.parts.contains("sleep") { try SleepBenchmark().run() }
        if self.parts.contains("wake") { try WakeBenchmark(rounds: self.wakeRounds).run() }
        if self.parts.contains("notifications") {
            try NotificationsBenchmark(
                pending: self.notificationsPending, apps: self.notificationApps, burst: self.notificationsBurst,
                spread: self.notificationsSpread, spreadSeconds: self.notificationsSpreadSeconds
            ).run()
        }
    }

    private func measureDaemon() throws {
        var startups: [Double] = []
        var residentKiB: [Int] = []
        for _ in 0..<self.starts {
            let clockStart = ContinuousClock.now
            let daemon = try DaemonProcess()
            try daemon.waitUntilReady()
            startups.append((ContinuousClock.now - clockStart).milliseconds)
            if residentKiB.count < 3 {
                // Idle: ready, no client, after a second to settle.
                Thread.sleep(forTimeInterval: 1)
                if let kib = daemon.residentKiB { residentKiB.append(kib) }
            }
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }
        startups.sort()
        print("| measure | value |")
        print("|---|---|")
        print("| start-up to READY=1, median of \(self.starts) | \(Self.format(startups.percentile(0.5))) ms |")
        print("| start-up to READY=1, min / max | \(Self.format(startups.first!)) / \(Self.format(startups.last!)) ms |")
        print("| idle RSS after READY=1 | \(residentKiB.sorted()[residentKiB.count / 2] / 1024) MiB (\(residentKiB.sorted()[residentKiB.count / 2]) KiB) |")
        print("")

        let daemon = try DaemonProcess()
        try daemon.waitUntilReady()
        let varlink = try self.measureVarlink(socket: daemon.socketPath)
        daemon.signal(SIGTERM)
        _ = daemon.waitForExit()

        let directory = try TemporaryDirectory()
        let echo = try EchoServer(path: directory.file("echo.sock"))
        let bare = try self.measureEcho(socket: echo.path)

        print("| round trips, 1 client, \(self.calls) calls | calls/s | p50 | p99 |")
        print("|---|---|---|---|")
        print(varlink.row("Varlink io.coalesced.System.Stats"))
        print(bare.row("bare Unix-socket echo, same message"))
        print("")
    }

    /// Transitions per second through System.Activate with `apps` attached apps, and the daemon's memory with
    /// `registered` apps in its registry.
    private func measureLifecycle() throws {
        print("| lifecycle | value |")
        print("|---|---|")
        for logLevel in ["info", "notice"] {
            // Deadlines out of the way: the benchmark attaches the apps itself and does not acknowledge.
            let daemon = try DaemonProcess(configuration: "[Daemon]\nLogLevel=\(logLevel)\n[Apps]\nAcknowledgeTimeoutSec=1h\n")
            try daemon.waitUntilReady()
            let names = (0..<self.apps).map { "org.bench.app\($0)" }
            let client = try VarlinkClient(path: daemon.socketPath)
            let registerStart = ContinuousClock.now
            for name in names { _ = try client.call("io.coalesced.App.Register", ["name": .string(name)]) }
            let registerTime = (ContinuousClock.now - registerStart).milliseconds
            // Each attach launches its app to the foreground, sending the previous one to the background.
            var streams: [VarlinkClient] = []
            for name in names {
                let stream = try VarlinkClient(path: daemon.socketPath)
                try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(name)], more: true))
                _ = try stream.receiveReply()
                streams.append(stream)
            }
            let drain = try StreamDrain(streams)
            let before = try client.call("io.coalesced.System.Stats")["stats"]?["transitions"]?.intValue ?? 0
            let start = ContinuousClock.now
            for index in 0..<self.activations {
                _ = try client.call("io.coalesced.System.Activate", ["app": .string(names[(index * 7919) % names.count])])
            }
            let seconds = (ContinuousClock.now - start).milliseconds / 1000
            let after = try client.call("io.coalesced.System.Stats")["stats"]?["transitions"]?.intValue ?? 0
            let transitions = Double(after - before)
            print("| LogLevel=\(logLevel): System.Activate calls/s, \(self.apps) apps attached, 1 client | \(Int(Double(self.activations) / seconds)) |")
            print("| LogLevel=\(logLevel): transitions/s (\(Int(transitions / Double(self.activations))) per call: the previous app leaves, the next comes) | \(Int(transitions / seconds)) |")
            if logLevel == "info" {
                print("| \(self.apps) Register calls, one after another (each a store commit) | \(Self.format(registerTime)) ms |")
                print("| RSS with \(self.apps) apps attached | \((daemon.residentKiB ?? 0) / 1024) MiB |")
            }
            drain.stop()
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }

        var entries: [JSONValue] = []
        for index in 0..<self.registered {
            entries.append(
                [
                    "name": .string("org.bench.registered\(index)"), "owner": 0, "backgroundModes": [],
                    "exitsOnSuspend": false,
                ]
            )
        }
        let registry: JSONValue = ["version": 1, "apps": .array(entries)]
        let daemon = try DaemonProcess(stateFiles: ["apps.json": registry.jsonText])
        try daemon.waitUntilReady()
        let listed = try VarlinkClient(path: daemon.socketPath).call("io.coalesced.System.Stats")["stats"]?["apps"]?.intValue ?? 0
        Thread.sleep(forTimeInterval: 1)
        print("| RSS with \(listed) registered apps (none running), after READY=1 | \((daemon.residentKiB ?? 0) / 1024) MiB |")
        daemon.signal(SIGTERM)
        _ = daemon.waitForExit()
        print("")
    }

    private func measureVarlink(socket: String) throws -> RoundTrips {
        let client = try VarlinkClient(path: socket)
        for _ in 0..<1000 { _ = try client.call("io.coalesced.System.Stats") }
        return try RoundTrips.measure(count: self.calls) {
            _ = try client.call("io.coalesced.System.Stats")
        }
    }

    private func measureEcho(socket: String) throws -> RoundTrips {
        let client = try VarlinkClient(path: socket)
        var request: [UInt8] = []
        VarlinkCall(method: "io.coalesced.System.Stats").message.write(to: &request)
        request.append(0)
        for _ in 0..<1000 {
            try client.sendRaw(request)
            _ = try client.receiveFrame()
        }
        return try RoundTrips.measure(count: self.calls) {
            try client.sendRaw(request)
            _ = try client.receiveFrame()
        }
    }

    static func format(_ value: Double) -> String {
        String(format: "%.1f", value)
    }
}

struct RoundTrips {
    var perSecond: Double
    var p50: Double
    var p99: Double

    static func measure(count: Int, _ body: () throws -> Void) throws -> RoundTrips {
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<count {
            let before = clock.now
            try body()
            latencies.append((clock.now - before).microseconds)
        }
        let total = (clock.now - start).milliseconds / 1000
        latencies.sort()
        return RoundTrips(perSecond: Double(count) / total, p50: latencies.percentile(0.5), p99: latencies.percentile(0.99))
    }

    func row(_ name: String) -> String {
        "| \(name) | \(Int(self.perSecond)) | \(String(format: "%.1f", self.p50)) µs | \(String(format: "%.1f", self.p99)) µs |"
    }
}

extension Array where Element == Double {
    /// The value below which `fraction` of the sorted values lie.
    func percentile(_ fraction: Double) -> Double {
        self[Swift.min(self.count - 1, Int(Double(self.count) * fraction))]
    }
}

extension Duration {
    var milliseconds: Double { Double(self.components.seconds) * 1000 + Double(self.components.attoseconds) / 1e15 }
    var microseconds: Double { Double(self.components.seconds) * 1e6 + Double(self.components.attoseconds) / 1e12 }
}

/// A Unix-socket listener serving one connection at a time on a thread of its own, for the baselines.
func serveUnixSocket(path: String, _ serve: @escaping @Sendable (CInt) -> Void) throws {
    let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    try bindUnixSocket(listener, path: path)
    guard listen(listener, 16) == 0 else { throw SupportError("\(path): listen failed") }
    Thread.detachNewThread {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            serve(connection)
            close(connection)
        }
    }
}

/// A bare Unix-socket echo: one thread, blocking calls, every NUL-terminated message written straight back.
final class EchoServer: Sendable {
    let path: String

    init(path: String) throws {
        self.path = path
        try serveUnixSocket(path: path) { connection in
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                // The client waits for each reply, so whatever arrived is whole messages: echo it as it is.
                var offset = 0
                while offset < count {
                    let sent = buffer.withUnsafeBytes { send(connection, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                    if sent <= 0 { break }
                    offset += sent
                }
            }
        }
    }
}

/// Reads and discards what the daemon streams to the benchmark's attached apps, so that their callbacks never
/// back up, the way a real app reads its stream. Given the apps' names, it also acknowledges their events as an
/// app does (one Ack, oneway, up to the last number read), so that the daemon keeps sending rather than holding
/// them for an app that has fallen behind.
final class StreamDrain: @unchecked Sendable {
    private let descriptors: [CInt]
    private let stopped = NSLock()
    private var done = false
    private let streams: [VarlinkClient]
    private let apps: [String]?
    /// A connection per app for its Acks (the stream's own connection is busy with its Attach).
    private let acknowledgers: [VarlinkClient]?

    init(_ streams: [VarlinkClient], acknowledging apps: [String]? = nil) throws {
        self.streams = streams
        self.descriptors = streams.map(\.descriptor)
        self.apps = apps
        self.acknowledgers = try apps.map { names in try names.map { _ in try VarlinkClient(path: streams[0].path) } }
        Thread.detachNewThread { [self] in
            var polls = self.descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !self.stopped.withLock({ self.done }) {
                guard poll(&polls, nfds_t(polls.count), 100) > 0 else { continue }
                for index in polls.indices where polls[index].revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(polls[index].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    guard let acknowledgers = self.acknowledgers, let apps = self.apps, count > 0, let seq = Self.lastSequence(buffer[..<count]) else { continue }
                    let ack = VarlinkCall(
                        method: "io.coalesced.App.Ack",
                        parameters: ["app": .string(apps[index]), "seq": .int(seq)],
                        oneway: true
                    )
                    try? acknowledgers[index].send(ack)
                }
            }
        }
    }

    /// The last `"seq":N` in what was read (a number cut by the end of the read reads smaller: an Ack up to less).
    private static func lastSequence(_ bytes: ArraySlice<UInt8>) -> Int64? {
        let key = Array(#""seq":"#.utf8)
        var last: Int64?
        var index = bytes.startIndex
        while index + key.count <= bytes.endIndex {
            guard bytes[index..<index + key.count].elementsEqual(key) else {
                index += 1
                continue
            }
            index += key.count
            var value: Int64 = 0
            var digits = 0
            while index < bytes.endIndex, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
                digits += 1
                index += 1
            }
            if digits > 0 { last = value }
        }
        return last
    }

    func stop() {
        self.stopped.withLock { self.done = true }
    }
}

/// 1,000 attached apps need more descriptors than the usual soft limit of 1,024.
func raiseDescriptorLimit() {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

