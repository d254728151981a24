import CoalesceTestSupport
import Foundation
import Varlink

/// Posts into suspended apps and the baselines the same run measures: a bare Unix socket and Redis.
struct EventsBenchmark {
    var posts: Int
    var wakePosts: [Int]
    var suspendedApps: Int
    var memoryPosts: [Int]

    /// Every post's payload: about 150 bytes a message with the call around it.
    static let payload: JSONValue = ["text": .string(String(repeating: "x", count: 120))]

    func run() throws {
        print("| events | value |")
        print("|---|---|")
        let directory = try TemporaryDirectory()
        let payload = Self.payload

        // Baselines: the bare socket.
        let sink = try SinkServer(path: directory.file("sink.sock"))
        let streamed = try sink.measure(messages: 200_000, size: 150)
        print("| bare socket, 150-byte messages one write each, 1 client | \(Int(streamed)) msgs/s |")
        let echo = try EchoServer(path: directory.file("echo.sock"))
        let echoClient = try VarlinkClient(path: echo.path)
        let message = [UInt8](repeating: 0x61, count: 149) + [0]
        let pingPong = try RoundTrips.measure(count: 20_000) {
            try echoClient.sendRaw(message)
            _ = try echoClient.receiveFrame()
        }
        print("| bare socket ping-pong round trip, p50 / p99 | \(Self.format(pingPong.p50)) / \(Self.format(pingPong.p99)) µs |")
        let sync = try Self.fdatasyncLatency(directory.file("sync.dat"))
        print("| fdatasync of 150 bytes, p50 (same file system as the store) | \(Self.format(sync)) µs |")

        // Baselines: Redis, in memory and with every write fsynced.
        for (name, arguments) in [
            ("Redis in memory", ["--appendonly", "no"]),
            ("Redis appendfsync always", ["--appendonly", "yes", "--appendfsync", "always"]),
        ] {
            if let redis = try Redis.measure(directory: directory, arguments: arguments) {
                print(
                    "| \(name): LPUSH -d 150, 1 client / 1 client -P 64 / 4 clients -P 64 | "
                        + "\(Int(redis.single)) / \(Int(redis.onePipelined)) / \(Int(redis.pipelined)) ops/s |"
                )
            } else {
                print("| \(name) | redis-server not installed (scripts/setup --bench) |")
            }
        }

        // coalesced: durable posts into suspended apps (held, one row per kind).
        let daemon = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1h\n")
        try daemon.waitUntilReady()
        let client = try VarlinkClient(path: daemon.socketPath)
        for index in 0..<4 { _ = try client.call("io.coalesced.App.Register", ["name": .string("org.bench.target\(index)")]) }
        let targets = try Self.suspended((0..<4).map { "org.bench.target\($0)" }, socket: daemon.socketPath, client: client)
        defer { targets.stop() }
        let cpuBefore = Self.cpuMicroseconds(daemon.pid)
        let one = try Self.pipelined(daemon.socketPath, producers: 1, posts: self.posts, payload: payload)
        let cpuDurable = (Self.cpuMicroseconds(daemon.pid) - cpuBefore) / Double(self.posts)
        print("| Post into a suspended app, durable, 1 producer pipelined (64 at a time) | \(Int(one)) posts/s |")
        let four = try Self.pipelined(daemon.socketPath, producers: 4, posts: self.posts, payload: payload)
        print("| Post into suspended apps, durable, 4 producers pipelined (64 at a time each) | \(Int(four)) posts/s |")
        for index in 0..<4 {
            _ = try client.call(
                "io.coalesced.App.Register",
                ["name": .string("org.bench.volatile\(index)"), "kinds": ["kind0": ["policy": "latest", "volatile": true]]]
            )
        }
        let volatileTargets = try Self.suspended((0..<4).map { "org.bench.volatile\($0)" }, socket: daemon.socketPath, client: client)
        defer { volatileTargets.stop() }
        let cpuVolatileBefore = Self.cpuMicroseconds(daemon.pid)
        let volatileOne = try Self.pipelined(daemon.socketPath, producers: 1, posts: self.posts, payload: payload, appPrefix: "org.bench.volatile")
        let cpuVolatile = (Self.cpuMicroseconds(daemon.pid) - cpuVolatileBefore) / Double(self.posts)
        let volatileFour = try Self.pipelined(daemon.socketPath, producers: 4, posts: self.posts, payload: payload, appPrefix: "org.bench.volatile")
        print("| Post into suspended apps, volatile, 1 / 4 producers pipelined | \(Int(volatileOne)) / \(Int(volatileFour)) posts/s |")
        print("| daemon CPU (user + system) per post, 1 producer: durable / volatile | \(Self.format(cpuDurable)) / \(Self.format(cpuVolatile)) µs |")

        // The same four producers against a daemon with two event loops (connections spread over them).
        let loops = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1h\n[Varlink]\nEventLoops=2\n")
        try loops.waitUntilReady()
        let loopsClient = try VarlinkClient(path: loops.socketPath)
        for index in 0..<4 {
            _ = try loopsClient.call("io.coalesced.App.Register", ["name": .string("org.bench.target\(index)")])
            _ = try loopsClient.call(
                "io.coalesced.App.Register",
                ["name": .string("org.bench.volatile\(index)"), "kinds": ["kind0": ["policy": "latest", "volatile": true]]]
            )
        }
        let loopsTargets = try Self.suspended(
            (0..<4).flatMap { ["org.bench.target\($0)", "org.bench.volatile\($0)"] }, socket: loops.socketPath, client: loopsClient
        )
        let loopsDurable = try Self.pipelined(loops.socketPath, producers: 4, posts: self.posts, payload: payload)
        let loopsVolatile = try Self.pipelined(loops.socketPath, producers: 4, posts: self.posts, payload: payload, appPrefix: "org.bench.volatile")
        print("| EventLoops=2: 4 producers pipelined, durable / volatile | \(Int(loopsDurable)) / \(Int(loopsVolatile)) posts/s |")
        loopsTargets.stop()
        loops.signal(SIGTERM)
        _ = loops.waitForExit()

        // A single post's round trip to an active app, durable and volatile (no disk in the way).
        let roundTrip = try Self.roundTrip(daemon.socketPath, app: "org.bench.active", count: 5_000, payload: payload)
        print("| Post round trip to an active app, durable, p50 / p99 | \(Self.format(roundTrip.p50)) / \(Self.format(roundTrip.p99)) µs |")
        let volatileTrip = try Self.roundTrip(
            daemon.socketPath,
            app: "org.bench.volatile-active",
            kinds: ["bench": ["policy": "latest", "volatile": true]],
            count: 20_000,
            payload: payload
        )
        print("| Post round trip to an active app, volatile, p50 / p99 | \(Self.format(volatileTrip.p50)) / \(Self.format(volatileTrip.p99)) µs |")

        // Wake: an app suspended, many posts across 100 kinds held for it, then the time from System.Activate to
        // its last coalesced event; once per number of posts, to show it does not depend on it.
        for (index, posts) in self.wakePosts.enumerated() {
            let sleeper = "org.bench.sleeper\(index)"
            let stream = try Self.suspendedWithOwnStream(sleeper, socket: daemon.socketPath, client: client)
            _ = try Self.pipelined(daemon.socketPath, producers: 4, posts: posts, payload: payload, target: sleeper, kinds: 100)
            let start = ContinuousClock.now
            _ = try client.call("io.coalesced.System.Activate", ["app": .string(sleeper)])
            var events = 0
            while events < 100 {
                let reply = try stream.receiveReply()
                if let kind = reply.parameters["callback"]?["kind"]?.stringValue, !kind.hasPrefix("lifecycle.") { events += 1 }
            }
            let wake = (ContinuousClock.now - start).milliseconds
            print("| wake: \(posts) posts across 100 kinds held, Activate to the 100th event | \(Self.format(wake)) ms |")
        }
        daemon.signal(SIGTERM)
        _ = daemon.waitForExit()

        // Memory: suspended apps holding nothing, then after each total of posts to them.
        let memory = try DaemonProcess(configuration: "[Apps]\nAcknowledgeTimeoutSec=1h\n")
        try memory.waitUntilReady()
        let registrar = try VarlinkClient(path: memory.socketPath)
        for index in 0..<self.suspendedApps { _ = try registrar.call("io.coalesced.App.Register", ["name": .string("org.bench.app\(index)")]) }
        let sleepers = try Self.suspended((0..<self.suspendedApps).map { "org.bench.app\($0)" }, socket: memory.socketPath, client: registrar)
        defer { sleepers.stop() }
        var resident = ["\((memory.residentKiB ?? 0) / 1024)"]
        var posted = 0
        for total in self.memoryPosts where total > posted {
            _ = try Self.pipelined(
                memory.socketPath,
                producers: 4,
                posts: total - posted,
                payload: payload,
                appPrefix: "org.bench.app",
                apps: self.suspendedApps,
                kinds: 10
            )
            posted = total
            resident.append("\((memory.residentKiB ?? 0) / 1024)")
        }
        let totals = self.memoryPosts.map(String.init).joined(separator: " / ")
        print("| RSS, \(self.suspendedApps) suspended apps (10 kinds each) holding nothing / after \(totals) posts to them | \(resident.joined(separator: " / ")) MiB |")
        memory.signal(SIGTERM)
        _ = memory.waitForExit()
        try Self.quotaFlood()
        print("")
    }

    /// A hostile flood: one user posts 60 KiB payloads to its own app's volatile queue kind (bound 10,000), which
    /// nothing drains, past its quota. RSS is read when the quota first refuses, and again after as many posts more,
    /// all refused: flat at the ceiling.
    static func quotaFlood() throws {
        let quota = 64 << 20
        let daemon = try DaemonProcess(configuration: "[Quotas]\nAdminHeldBytes=\(quota)\n")
        try daemon.waitUntilReady()
        defer {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }
        let client = try VarlinkClient(path: daemon.socketPath)
        _ = try client.call(
            "io.coalesced.App.Register",
            ["name": "org.bench.flood", "kinds": ["chat": ["policy": "queue", "bound": 10000, "volatile": true]]]
        )
        let idle = (daemon.residentKiB ?? 0) / 1024
        let payload: JSONValue = ["text": .string(String(repeating: "x", count: 60 << 10))]
        func flood(_ posts: Int) throws -> Int {
            var refused = 0
            for _ in 0..<posts {
                do {
                    try post(client, "org.bench.flood", "chat", payload)
                } catch let error as VarlinkError where error.varlinkName == "io.coalesced.App.QuotaExceeded" {
                    refused += 1
                }
            }
            return refused
        }
        let filling = quota / (60 << 10) + 16
        let refusedFilling = try flood(filling)
        let atCeiling = (daemon.residentKiB ?? 0) / 1024
        let refusedAfter = try flood(filling)
        let after = (daemon.residentKiB ?? 0) / 1024
        print(
            "| RSS under a flood of 60 KiB volatile posts past AdminHeldBytes=64M: idle / at the quota (\(filling - refusedFilling) taken) / after \(filling) more (\(refusedAfter) refused) | \(idle) / \(atCeiling) / \(after) MiB |"
        )
    }

    /// Attaches each of `names` (registered) from the benchmark's process, as its apps' processes would, has their
    /// callbacks read and acknowledged, and sends them home until every one is suspended: what posts are held for.
    /// Returns the drain that keeps reading their streams.
    static func suspended(_ names: [String], socket: String, client: VarlinkClient) throws -> StreamDrain {
        var streams: [VarlinkClient] = []
        for name in names {
            let stream = try VarlinkClient(path: socket)
            try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(name)], more: true))
            _ = try stream.receiveReply()
            streams.append(stream)
        }
        let drain = try StreamDrain(streams, acknowledging: names)
        // Each launch to the foreground sent the app before it home; the last one goes home now.
        _ = try client.call("io.coalesced.System.Deactivate")
        try Self.waitUntilSuspended(names, client: client)
        return drain
    }

    /// One app registered, attached from the benchmark's process and suspended, its stream left for the caller to
    /// read.
    static func suspendedWithOwnStream(_ name: String, socket: String, client: VarlinkClient) throws -> VarlinkClient {
        let stream = try attachedFromThisProcess(socket, app: name)
        _ = try client.call("io.coalesced.System.Deactivate", ["app": .string(name)])
        while true {
            let callback = try stream.receiveReply().parameters["callback"]
            guard callback?["kind"] == "lifecycle.didEnterBackground", let seq = callback?["seq"] else { continue }
            _ = try client.call("io.coalesced.App.Ack", ["app": .string(name), "seq": seq])
            break
        }
        try Self.waitUntilSuspended([name], client: client)
        return stream
    }

    static func waitUntilSuspended(_ names: [String], client: VarlinkClient) throws {
        for name in names { try waitForApp(client, name, "state", "suspended", timeout: .seconds(60)) }
    }

    /// Registers `app`, attaches it (the bench reads its stream and acknowledges its events as the app would) and
    /// times posts to it, one at a time, each answered before the next. The poster is as lean as the ping-pong it
    /// is held against: the call encoded once, the reply checked for an error without being parsed.
    static func roundTrip(_ socket: String, app: String, kinds: JSONValue = [:], count: Int, payload: JSONValue) throws -> RoundTrips {
        let client = try VarlinkClient(path: socket)
        _ = try client.call("io.coalesced.App.Register", ["name": .string(app), "kinds": kinds])
        let stream = try VarlinkClient(path: socket)
        try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(app)], more: true))
        _ = try stream.receiveReply()
        let drain = try StreamDrain([stream], acknowledging: [app])
        defer { drain.stop() }
        var frame: [UInt8] = []
        VarlinkCall(method: "io.coalesced.App.Post", parameters: ["target": .string(app), "kind": "bench", "payload": payload])
            .message.write(to: &frame)
        frame.append(0)
        let errorMember = Array(#""error""#.utf8)
        return try RoundTrips.measure(count: count) {
            try client.sendRaw(frame)
            let reply = try client.receiveFrame()
            if Self.contains(reply, errorMember) { throw SupportError("post failed: \(String(decoding: reply, as: UTF8.self))") }
        }
    }

    /// Posts from `producers` threads, each pipelining 64 calls at a time; returns posts per second.
    ///
    /// A producer pipelines as redis-benchmark's `-P 64` does: it writes 64 calls at once, reads their 64 replies,
    /// then writes the next 64. It is as lean: each distinct call is encoded once, and a reply is parsed only if it
    /// is an error. So the figure is the daemon's, not
    /// the producer's JSON encoding (the producer shares this machine's two cores with the daemon).
    static func pipelined(
        _ socket: String,
        producers: Int,
        posts: Int,
        payload: JSONValue,
        target: String? = nil,
        appPrefix: String = "org.bench.target",
        apps: Int = 4,
        kinds: Int = 1
    ) throws -> Double {
        let perProducer = posts / producers
        let window = 64
        let start = ContinuousClock.now
        let done = DispatchGroup()
        let failures = LockedCount()
        let errorMember = Array(#""error""#.utf8)
        for producer in 0..<producers {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    let client = try VarlinkClient(path: socket)
                    // The calls this producer sends, by (app, kind), each one frame ready to write.
                    var frames: [[UInt8]] = []
                    let targets = target.map { [$0] } ?? (0..<apps).map { "\(appPrefix)\($0)" }
                    for app in targets {
                        for kind in 0..<kinds {
                            var frame: [UInt8] = []
                            VarlinkCall(
                                method: "io.coalesced.App.Post",
                                parameters: ["target": .string(app), "kind": .string("kind\(kind)"), "payload": payload]
                            ).message.write(to: &frame)
                            frame.append(0)
                            frames.append(frame)
                        }
                    }
                    var sent = 0
                    var answered = 0
                    var burst: [UInt8] = []
                    while answered < perProducer {
                        burst.removeAll(keepingCapacity: true)
                        while sent < perProducer, sent == answered || sent % window != 0 {
                            let app = target == nil ? (producer + sent) % apps : 0
                            burst.append(contentsOf: frames[app * kinds + sent % kinds])
                            sent += 1
                        }
                        if !burst.isEmpty { try client.sendRaw(burst) }
                        let reply = try client.receiveFrame()
                        if Self.contains(reply, errorMember) {
                            failures.add()
                            if failures.value == 1 { print("first failed post: \(String(decoding: reply, as: UTF8.self))") }
                        }
                        answered += 1
                    }
                } catch {
                    failures.add()
                }
            }
        }
        done.wait()
        guard failures.value == 0 else { throw SupportError("\(failures.value) posts failed") }
        return Double(perProducer * producers) / ((ContinuousClock.now - start).milliseconds / 1000)
    }

    private static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { start in bytes[start..<start + needle.count].elementsEqual(needle) }
    }

    static func fdatasyncLatency(_ path: String) throws -> Double {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SupportError("cannot create \(path)") }
        defer { close(fd) }
        let bytes = [UInt8](repeating: 0x61, count: 150)
        var samples: [Double] = []
        for _ in 0..<200 {
            let start = ContinuousClock.now
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fdatasync(fd)
            samples.append((ContinuousClock.now - start).microseconds)
        }
        samples.sort()
        return samples.percentile(0.5)
    }

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// CPU time a process has used, user and system, in microseconds (from /proc/PID/stat, in clock ticks).
    static func cpuMicroseconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        // Fields after the command name: state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) * 1_000_000 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { self.lock.withLock { self.count += 1 } }
    var value: Int { self.lock.withLock { self.count } }
}

/// A Unix-socket server that reads and discards: the most a client's one-write-per-message stream can do.
final class SinkServer: Sendable {
    let path: String

    init(path: String) throws {
        self.path = path
        try serveUnixSocket(path: path) { connection in
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            while buffer.withUnsafeMutableBytes({ recv(connection, $0.baseAddress, $0.count, 0) }) > 0 {}
        }
    }

    /// Messages per second for one client writing `messages` messages of `size` bytes, one write each.
    func measure(messages: Int, size: Int) throws -> Double {
        let client = try VarlinkClient(path: self.path)
        let message = [UInt8](repeating: 0x61, count: size - 1) + [0]
        let start = ContinuousClock.now
        for _ in 0..<messages { try client.sendRaw(message) }
        return Double(messages) / ((ContinuousClock.now - start).milliseconds / 1000)
    }
}

/// redis-server on a Unix socket, driven by redis-benchmark.
enum Redis {
    /// LPUSH operations per second: one client, one command at a time; one client pipelining 64 (the shape of one
    /// pipelining producer of ours); four clients pipelining 64 each.
    static func measure(
        directory: TemporaryDirectory,
        arguments: [String]
    ) throws -> (single: Double, onePipelined: Double, pipelined: Double)? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-benchmark")
        else { return nil }
        let socket = directory.file("redis-\(arguments.count).sock")
        let data = directory.file("redis-\(arguments.count)")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let server = try ChildProcess(
            "/usr/bin/redis-server",
            ["--port", "0", "--unixsocket", socket, "--dir", data, "--save", ""] + arguments
        )
        defer {
            server.signal(SIGTERM)
            _ = server.wait(timeout: .seconds(10))
        }
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: socket) { usleep(20_000) }
        func run(_ extra: [String]) throws -> Double {
            let result = try runProcess(
                "/usr/bin/redis-benchmark",
                ["-s", socket, "-t", "lpush", "-d", "150", "-n", "100000", "-q"] + extra
            )
            // "LPUSH: 12345.67 requests per second, p50=0.031 msec"
            guard let number = result.stdout.split(separator: "\r").last?.split(separator: " ").dropFirst().first,
                let value = Double(number)
            else { throw SupportError("redis-benchmark said: \(result.stdout) \(result.stderr)") }
            return value
        }
        return (try run(["-c", "1"]), try run(["-c", "1", "-P", "64"]), try run(["-c", "4", "-P", "64"]))
    }
}
