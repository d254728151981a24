import CoalesceTestSupport
import Foundation
import Varlink

/// Start-up and wake with the store filled to the quotas: durable posts held for suspended apps of several users
/// until the daemon's ceiling (`HeldBytes=`) refuses, then the daemon stopped and started again on that store, and
/// the wake of an app that holds its user's whole quota. Each figure next to its baseline from the same run: the
/// start-up on an empty store, the wake of an app that holds one small event.
///
/// It uses the default quotas. Ownership is what spreads the 256 MiB: nine users at `UserHeldBytes=16M` each
/// (144 MiB) and root's apps at `AdminHeldBytes=128M`, which the ceiling stops at about 112 MiB. The apps are
/// registered through an `apps.json` in the state directory (the registry of older versions, imported at the first
/// start), the one way to give apps owners other than the caller; the benchmark, as root, posts to them all and
/// attaches them all from its own process.
struct StoreBenchmark {
    /// Starts measured on each store.
    var starts: Int

    /// The only settings changed: the benchmark is every app's process and acknowledges at once, and after each
    /// restart its apps wait for it to attach again (a process that outlived the daemon has `LaunchTimeoutSec=` to
    /// do so), so that every start finds them as the fill left them.
    static let configuration = "[Apps]\nLaunchTimeoutSec=1h\nAcknowledgeTimeoutSec=1h\n"

    /// The app that is woken holding its user's whole quota, alone, in 1 KiB queue entries.
    static let fullApp = "org.bench.wake.full"
    static let fullOwner: UInt32 = 50_000
    /// The baseline: an app of root's that holds one small event.
    static let smallApp = "org.bench.wake.small"
    /// Eight more users with two apps each, and root's four; each app a mix of kinds.
    static let users: [UInt32] = (1...8).map { 50_000 + $0 }
    static func userApps(_ uid: UInt32) -> [String] { ["org.bench.user\(uid).mail", "org.bench.user\(uid).photos"] }
    static let adminApps = (0..<4).map { "org.bench.admin\($0)" }

    static let smallPayload: JSONValue = ["text": .string(String(repeating: "s", count: 120))]

    /// A payload whose JSON text is `size` bytes: `{"text":"…"}`.
    static func payload(_ size: Int, member: String = "text") -> JSONValue {
        [member: .string(String(repeating: "x", count: size - member.utf8.count - 7))]
    }

    func run() throws {
        print("| store filled to the quotas | value |")
        print("|---|---|")

        // Baseline: an empty store, started once to create it, then stopped and started again.
        let empty = try DaemonProcess(configuration: Self.configuration)
        try empty.waitUntilReady()
        let emptyStarts = try Self.restarts(of: empty, count: self.starts)
        emptyStarts.last.signal(SIGTERM)
        _ = emptyStarts.last.waitForExit()

        // The store filled: the apps registered, suspended, and posted to until the ceiling refuses.
        var entries: [JSONValue] = [Self.registration(Self.fullApp, owner: Self.fullOwner), Self.registration(Self.smallApp, owner: 0)]
        for uid in Self.users { entries += Self.userApps(uid).map { Self.registration($0, owner: uid) } }
        entries += Self.adminApps.map { Self.registration($0, owner: 0) }
        let registry: JSONValue = ["version": 1, "apps": .array(entries)]
        let filling = try DaemonProcess(configuration: Self.configuration, stateFiles: ["apps.json": registry.jsonText])
        try filling.waitUntilReady()
        let system = try testClient(filling.socketPath, timeout: .seconds(120))
        let mixed = Self.users.flatMap(Self.userApps) + Self.adminApps
        let drain = try EventsBenchmark.suspended(mixed, socket: filling.socketPath, client: system)
        var full = try Sleeper(Self.fullApp, socket: filling.socketPath)
        try full.suspendAfterLaunch(system: system)
        var small = try Sleeper(Self.smallApp, socket: filling.socketPath)
        try small.suspendAfterLaunch(system: system)

        try post(system, Self.smallApp, "note", Self.smallPayload)
        let fillStart = ContinuousClock.now
        let fullFill = try Self.fill(filling.socketPath, apps: [Self.fullApp], post: { Self.chatPost($0) })
        var userFills: [Filled] = []
        for uid in Self.users { userFills.append(try Self.fill(filling.socketPath, apps: Self.userApps(uid), post: { Self.mixedPost($0) })) }
        let adminFill = try Self.fill(filling.socketPath, apps: Self.adminApps, post: { Self.mixedPost($0) })
        let fillSeconds = (ContinuousClock.now - fillStart).milliseconds / 1000
        let held = try Self.heldBytes(system)
        let fullEvents = try Self.heldEvents(Self.fullApp, system: system)
        let userTaken = userFills.map(\.taken).reduce(0, +)
        let userQuotas = Set(userFills.compactMap(\.quota)).sorted().joined(separator: ", ")
        print("| filling: the woken app (uid \(Self.fullOwner), 1 KiB queue entries) | \(fullFill.taken) posts taken, then refused by \(fullFill.quota ?? "nothing") |")
        print("| filling: \(Self.users.count) users' \(Self.users.count * 2) apps, mixed kinds | \(userTaken) posts taken, each user then refused by \(userQuotas) |")
        print("| filling: root's \(Self.adminApps.count) apps, mixed kinds | \(adminFill.taken) posts taken, then refused by \(adminFill.quota ?? "nothing") |")
        print("| held after the fill (Stats quotas.heldBytes), of HeldBytes | \(Self.mebibytes(held.bytes)) of \(Self.mebibytes(held.limit)) MiB |")
        print("| filling: \(fullFill.taken + userTaken + adminFill.taken + 1) durable posts, 4 producers pipelining 64 each | \(Self.format(fillSeconds)) s |")
        print("| RSS of the daemon that took the posts, after the fill | \((filling.residentKiB ?? 0) / 1024) MiB |")
        drain.stop()
        filling.signal(SIGTERM)
        guard filling.waitForExit(timeout: .seconds(120)) != nil else { throw SupportError("the filled daemon did not stop on SIGTERM") }
        print("| store on disk after SIGTERM (coalesced.db and its WAL) | \(Self.mebibytes(Self.storeBytes(filling.stateDirectory))) MiB |")

        // Start-ups on the filled store; the last daemon stays for the wakes.
        let filledStarts = try Self.restarts(of: filling, count: self.starts, alreadyStopped: true)
        print(Self.startRow("start-up to READY=1, empty store", emptyStarts.startups))
        print(Self.startRow("start-up to READY=1, store filled to the quotas", filledStarts.startups))
        print("| RSS a second after READY=1, empty / filled store (median of \(self.starts)) | \(Self.median(emptyStarts.residentKiB) / 1024) / \(Self.median(filledStarts.residentKiB) / 1024) MiB |")

        // Wakes after the restart: what the apps hold was read from the store at start-up.
        let daemon = filledStarts.last
        let restarted = try testClient(daemon.socketPath, timeout: .seconds(120))
        let reread = try Self.heldBytes(restarted)
        print("| held after the restart, read from the store | \(Self.mebibytes(reread.bytes)) MiB |")
        try small.reattach(socket: daemon.socketPath, expecting: "suspended")
        try full.reattach(socket: daemon.socketPath, expecting: "suspended")
        let smallAfterRestart = try small.wake(events: Self.heldEvents(Self.smallApp, system: restarted), system: restarted)
        try small.sendHome(system: restarted)
        let fullAfterRestart = try full.wake(events: Self.heldEvents(Self.fullApp, system: restarted), system: restarted)
        try full.sendHome(system: restarted)

        // Wakes in the daemon that took the posts: the same apps filled again.
        try post(restarted, Self.smallApp, "note", Self.smallPayload)
        let smallLive = try small.wake(events: Self.heldEvents(Self.smallApp, system: restarted), system: restarted)
        let refill = try Self.fill(daemon.socketPath, apps: [Self.fullApp], post: { Self.chatPost($0) })
        let refilled = try Self.heldEvents(Self.fullApp, system: restarted)
        let fullLive = try full.wake(events: refilled, system: restarted)
        print(
            "| wake after the restart: app holding 1 small event / its user's whole quota (\(fullEvents) events of 1 KiB, \(fullFill.taken) posts) | \(Self.format(smallAfterRestart.last)) / \(Self.format(fullAfterRestart.last)) ms (first event of the whole quota at \(Self.format(fullAfterRestart.first)) ms) |"
        )
        print(
            "| wake in the daemon that took the posts: 1 small event / whole quota (\(refilled) events, refused by \(refill.quota ?? "nothing")) | \(Self.format(smallLive.last)) / \(Self.format(fullLive.last)) ms (first event at \(Self.format(fullLive.first)) ms) |"
        )
        daemon.signal(SIGTERM)
        _ = daemon.waitForExit(timeout: .seconds(120))
        print("")
    }

    // MARK: Start-ups

    struct Starts {
        var startups: [Double] = []
        var residentKiB: [Int] = []
        var last: DaemonProcess
    }

    /// Stops `daemon` with SIGTERM and starts another on its state directory, `count` times. Each start-up is
    /// measured as the daemon part measures it, from the start of the process to READY=1, and RSS is read a
    /// second after READY=1. The last daemon is left running.
    static func restarts(of daemon: DaemonProcess, count: Int, alreadyStopped: Bool = false) throws -> Starts {
        var result = Starts(last: daemon)
        for index in 0..<count {
            if !(alreadyStopped && index == 0) {
                result.last.signal(SIGTERM)
                guard result.last.waitForExit(timeout: .seconds(120)) != nil else { throw SupportError("the daemon did not stop on SIGTERM") }
            }
            let start = ContinuousClock.now
            let next = try result.last.restarted(configuration: Self.configuration, endingWith: SIGTERM)
            try next.waitUntilReady(timeout: .seconds(600))
            result.startups.append((ContinuousClock.now - start).milliseconds)
            Thread.sleep(forTimeInterval: 1)
            result.residentKiB.append(next.residentKiB ?? 0)
            result.last = next
        }
        return result
    }

    static func startRow(_ name: String, _ values: [Double]) -> String {
        let sorted = values.sorted()
        return "| \(name), median of \(values.count) (min / max) | \(Self.format(sorted.percentile(0.5))) ms (\(Self.format(sorted.first ?? 0)) / \(Self.format(sorted.last ?? 0))) |"
    }

    // MARK: Filling

    /// What one owner's apps took before a post was refused.
    struct Filled {
        var taken: Int
        /// The quota the refusal named (UserHeldBytes, AdminHeldBytes, HeldBytes).
        var quota: String?
    }

    /// One post: its app, kind, policy and payload size.
    struct PlannedPost {
        var kind: String
        var policy: JSONValue
        var size: Int
        var member: String = "text"
    }

    /// The `index`-th post to the woken app: 1 KiB chat messages in queue kinds, a new kind every 5,000 entries, so
    /// that no queue reaches its bound (10,000) and drops.
    static func chatPost(_ index: Int) -> PlannedPost {
        PlannedPost(kind: "chat.\(index / 5_000)", policy: ["policy": "queue", "bound": 10_000], size: 1_024)
    }

    /// The `index`-th post to a mixed app, in rounds of 64: one 60 KiB photo and sixty 1 KiB messages (queue kinds,
    /// a new one every 5,000 entries), a 1 KiB status and a 60 KiB draft (latest), and a 1 KiB settings change
    /// (merge, over 16 members, so that the merged payload grows to about 16 KiB). About half the bytes held end
    /// up in 60 KiB entries, half in 1 KiB ones.
    static func mixedPost(_ index: Int) -> PlannedPost {
        let round = index / 64
        let queue: JSONValue = ["policy": "queue", "bound": 10_000]
        switch index % 64 {
        case 0: return PlannedPost(kind: "photos.\(round / 5_000)", policy: queue, size: 60 << 10)
        case 1: return PlannedPost(kind: "status", policy: ["policy": "latest"], size: 1_024)
        case 2: return PlannedPost(kind: "draft", policy: ["policy": "latest"], size: 60 << 10)
        case 3: return PlannedPost(kind: "settings", policy: ["policy": "merge"], size: 1_024, member: "key\(round % 16)")
        case let slot: return PlannedPost(kind: "chat.\((round * 60 + slot - 4) / 5_000)", policy: queue, size: 1_024)
        }
    }

    /// Posts to `apps` (round robin, each app its own sequence of `post`), durable, 4 producers each pipelining 64
    /// at a time, until a reply refuses with QuotaExceeded; returns how many were taken and the quota named. Any
    /// other error fails the benchmark.
    static func fill(_ socket: String, apps: [String], post: @escaping @Sendable (Int) -> PlannedPost) throws -> Filled {
        let producers = 4
        let window = 64
        let shared = FillState()
        let done = DispatchGroup()
        for producer in 0..<producers {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    let client = try VarlinkClient(path: socket)
                    var frames: [String: [UInt8]] = [:]
                    var burst: [UInt8] = []
                    // Producer p takes posts p, p + 4, p + 8, … of the owner's sequence, so that the four together
                    // post each app's sequence (interleaved across the windows in flight).
                    var next = producer
                    while !shared.refused {
                        burst.removeAll(keepingCapacity: true)
                        for _ in 0..<window {
                            let app = apps[next % apps.count]
                            let planned = post(next / apps.count)
                            let key = "\(app) \(planned.kind) \(planned.size) \(planned.member)"
                            if frames[key] == nil {
                                var frame: [UInt8] = []
                                VarlinkCall(
                                    method: "io.coalesced.App.Post",
                                    parameters: [
                                        "target": .string(app), "kind": .string(planned.kind),
                                        "payload": Self.payload(planned.size, member: planned.member), "policy": planned.policy,
                                    ]
                                ).message.write(to: &frame)
                                frame.append(0)
                                frames[key] = frame
                            }
                            burst.append(contentsOf: frames[key]!)
                            next += producers
                        }
                        try client.sendRaw(burst)
                        for _ in 0..<window {
                            let reply = try client.receiveFrame()
                            guard reply.count > 8, Self.isError(reply) else {
                                shared.taken()
                                continue
                            }
                            let parsed = try VarlinkReply(message: try JSONParser.parse(reply))
                            guard parsed.error == "io.coalesced.App.QuotaExceeded" else {
                                throw SupportError("post refused: \(String(decoding: reply, as: UTF8.self))")
                            }
                            shared.refuse(quota: parsed.parameters["quota"]?.stringValue ?? "?")
                        }
                        if shared.count > 2_000_000 { throw SupportError("2,000,000 posts taken and no quota refused") }
                    }
                } catch {
                    shared.fail(error)
                }
            }
        }
        done.wait()
        if let error = shared.error { throw error }
        return Filled(taken: shared.count, quota: shared.quota)
    }

    /// Whether a reply is an error: `{"error":…` (the daemon writes the member first).
    private static func isError(_ reply: [UInt8]) -> Bool {
        let member = Array(#""error""#.utf8)
        return reply.count >= member.count + 1 && reply[1..<(1 + member.count)].elementsEqual(member)
    }

    static func registration(_ name: String, owner: UInt32) -> JSONValue {
        ["name": .string(name), "owner": .int(Int64(owner)), "backgroundModes": [], "exitsOnSuspend": false]
    }

    static func heldBytes(_ system: VarlinkClient) throws -> (bytes: Int, limit: Int) {
        let quotas = try system.call("io.coalesced.System.Stats")["stats"]?["quotas"]
        return (Int(quotas?["heldBytes"]?.intValue ?? 0), Int(quotas?["heldBytesLimit"]?.intValue ?? 0))
    }

    /// The events a wake of `app` delivers, by what it holds (`GetQueue`): one per kind, a queue kind one per entry.
    static func heldEvents(_ app: String, system: VarlinkClient) throws -> Int {
        let held = try system.call("io.coalesced.System.GetQueue", ["app": .string(app)])["held"]?.arrayValue ?? []
        return held.reduce(0) { total, kind in
            guard kind["policy"]?["policy"]?.stringValue == "queue" else { return total + 1 }
            let bound = Int(kind["policy"]?["bound"]?.intValue ?? 0)
            let count = Int(kind["count"]?.intValue ?? 0)
            return total + min(count, bound) + (count > bound ? 1 : 0)
        }
    }

    static func storeBytes(_ directory: String) -> Int {
        ["coalesced.db", "coalesced.db-wal"].reduce(0) { total, name in
            let size = (try? FileManager.default.attributesOfItem(atPath: directory + "/" + name))?[.size] as? Int
            return total + (size ?? 0)
        }
    }

    static func median(_ values: [Int]) -> Int { values.isEmpty ? 0 : values.sorted()[values.count / 2] }
    static func mebibytes(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / Double(1 << 20)) }
    static func format(_ value: Double) -> String { String(format: "%.1f", value) }
}

/// The producers' shared count of posts taken, and the first refusal.
private final class FillState: @unchecked Sendable {
    private let lock = NSLock()
    private var _count = 0
    private var _quota: String?
    private var _error: (any Error)?

    func taken() { self.lock.withLock { self._count += 1 } }
    func refuse(quota: String) { self.lock.withLock { if self._quota == nil { self._quota = quota } } }
    func fail(_ error: any Error) { self.lock.withLock { if self._error == nil { self._error = error } } }
    var count: Int { self.lock.withLock { self._count } }
    var quota: String? { self.lock.withLock { self._quota } }
    var error: (any Error)? { self.lock.withLock { self._error } }
    /// Refused, or failed: the producers stop after their window.
    var refused: Bool { self.lock.withLock { self._quota != nil || self._error != nil } }
}

/// An app whose process is the benchmark: its stream, read and acknowledged as the client library does.
struct Sleeper {
    let app: String
    private(set) var stream: VarlinkClient
    private(set) var requests: VarlinkClient

    /// Attaches `app` (registered, not running), which launches it to the foreground.
    init(_ app: String, socket: String) throws {
        self.app = app
        self.requests = try testClient(socket, timeout: .seconds(120))
        self.stream = try testClient(socket, timeout: .seconds(120))
        try self.stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(app)], more: true))
        _ = try self.stream.receiveReply()
    }

    /// After the attach's launch: acknowledges it, then sends the app home until it is suspended.
    mutating func suspendAfterLaunch(system: VarlinkClient) throws {
        try self.readCallbacks(until: "lifecycle.didBecomeActive")
        try self.sendHome(system: system)
    }

    /// Sends the app (in the foreground) home and acknowledges its callbacks until it is suspended.
    mutating func sendHome(system: VarlinkClient) throws {
        _ = try system.call("io.coalesced.System.Deactivate", ["app": .string(self.app)])
        try self.readCallbacks(until: "lifecycle.didEnterBackground")
        try waitForApp(system, self.app, "state", "suspended", timeout: .seconds(60))
    }

    /// Attaches again from this process, after a restart of the daemon: the app goes on in the state it was in.
    mutating func reattach(socket: String, expecting state: String) throws {
        self.requests = try testClient(socket, timeout: .seconds(120))
        self.stream = try testClient(socket, timeout: .seconds(120))
        try self.stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(self.app)], more: true))
        let first = try self.stream.receiveReply()
        guard first.parameters["state"]?.stringValue == state else {
            throw SupportError("\(self.app) attached again in state \(first.parameters["state"] ?? .null), not \(state)")
        }
    }

    /// Reads callbacks, acknowledging each, until one of `kind`.
    private mutating func readCallbacks(until kind: String) throws {
        while true {
            let callback = try self.stream.receiveReply().parameters["callback"]
            guard let seq = callback?["seq"] else { continue }
            _ = try self.requests.call("io.coalesced.App.Ack", ["app": .string(self.app), "seq": seq])
            if callback?["kind"]?.stringValue == kind { return }
        }
    }

    /// Calls `System.Activate` for the app (suspended) and reads its stream until `events` events came; returns the
    /// milliseconds from the call to the first event and to the last. The stream is read as the client library reads it: lifecycle
    /// callbacks acknowledged at once, events once a burst ends or every 256. Each reply is taken as it arrives
    /// and looked into for its number and kind, not parsed: the figure is the daemon's, not the reader's JSON.
    mutating func wake(events: Int, system: VarlinkClient) throws -> (first: Double, last: Double) {
        let start = ContinuousClock.now
        try system.send(VarlinkCall(method: "io.coalesced.System.Activate", parameters: ["app": .string(self.app)]))
        var received = 0
        var unacknowledged = 0
        var last: Int64?
        var first = 0.0
        var elapsed = 0.0
        while received < events {
            let frame = try self.stream.receiveFrame()
            guard let seq = Self.sequence(in: frame) else { continue }
            if Self.isLifecycle(frame) {
                try self.acknowledge(seq)
                unacknowledged = 0
                continue
            }
            received += 1
            unacknowledged += 1
            last = seq
            if received == 1 { first = (ContinuousClock.now - start).milliseconds }
            if received == events { elapsed = (ContinuousClock.now - start).milliseconds }
            if unacknowledged >= 256 || !self.stream.hasPendingInput {
                try self.acknowledge(seq)
                unacknowledged = 0
            }
        }
        if unacknowledged > 0, let last { try self.acknowledge(last) }
        let reply = try system.receiveReply()
        if let error = reply.error { throw SupportError("Activate \(self.app): \(error) \(reply.parameters)") }
        return (first, elapsed)
    }

    private func acknowledge(_ seq: Int64) throws {
        _ = try self.requests.call("io.coalesced.App.Ack", ["app": .string(self.app), "seq": .int(seq)])
    }

    /// The callback's `"seq":N`: the last in the reply, as the daemon adds it after the event's members (the
    /// payload's text cannot hold one unescaped, and the benchmark's payloads have no member of that name).
    static func sequence(in frame: [UInt8]) -> Int64? {
        let key = Array(#""seq":"#.utf8)
        var start = frame.count - key.count
        while start >= 0, !(frame[start] == key[0] && frame[start..<start + key.count].elementsEqual(key)) { start -= 1 }
        guard start >= 0 else { return nil }
        var index = start + key.count
        var value: Int64 = 0
        var digits = 0
        while index < frame.endIndex, frame[index] >= UInt8(ascii: "0"), frame[index] <= UInt8(ascii: "9") {
            value = value * 10 + Int64(frame[index] - UInt8(ascii: "0"))
            digits += 1
            index += 1
        }
        return digits > 0 ? value : nil
    }

    /// Whether the callback is a lifecycle one: its first `"kind":` (before any payload) names one.
    static func isLifecycle(_ frame: [UInt8]) -> Bool {
        let key = Array(#""kind":""#.utf8)
        let prefix = Array("lifecycle.".utf8)
        var index = 0
        while index + key.count <= frame.count {
            if frame[index] == key[0], frame[index..<index + key.count].elementsEqual(key) {
                let name = index + key.count
                return name + prefix.count <= frame.count && frame[name..<name + prefix.count].elementsEqual(prefix)
            }
            index += 1
        }
        return false
    }
}
