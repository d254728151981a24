import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The crash test: producers pipeline posts to suspended apps, and to one active app, while the daemon is killed
/// with SIGKILL at random moments and started again; the apps' processes live on through it all and attach to each
/// new daemon. When the suspended apps wake at the end, every answered post must be in the counts they receive
/// (none lost) and nothing but the posts that were sent (none invented): for each kind, answered ≤ delivered ≤
/// answered + posts whose answer the kill cut off. The active app's events, received as they come, through every
/// restart, are numbered upwards.
@Suite struct CrashTests {
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var answered: [String: Int] = [:]
        private(set) var unknown: [String: Int] = [:]
        private(set) var unexpected: [String] = []
        func answer(_ key: String) { self.lock.withLock { self.answered[key, default: 0] += 1 } }
        func cutOff(_ key: String) { self.lock.withLock { self.unknown[key, default: 0] += 1 } }
        func fail(_ error: String) { self.lock.withLock { self.unexpected.append(error) } }
        var total: Int { self.lock.withLock { self.answered.values.reduce(0, +) } }
        func answered(_ key: String) -> Int { self.lock.withLock { self.answered[key] ?? 0 } }
        func cutOff(of key: String) -> Int { self.lock.withLock { self.unknown[key] ?? 0 } }
    }

    static let sleepers = ["org.crash.a", "org.crash.b", "org.crash.c"]
    static let live = "org.crash.live"
    static let kinds = ["k1", "k2", "k3"]

    @Test func killMinusNineLosesNoAnsweredPostAndInventsNone() async throws {
        let first = try DaemonProcess(configuration: cooperative)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        // Each app launched to the foreground sends the one before home, where it is suspended; the live app,
        // launched last, stays active.
        let apps = try await onThread { () throws -> [String: ExampleApp] in
            let system = try testClient(socket)
            var apps: [String: ExampleApp] = [:]
            for name in Self.sleepers + [Self.live] {
                _ = try system.call(
                    "io.coalesced.App.Register",
                    ["name": .string(name), "kinds": .object(JSONObject(Self.kinds.map { ($0, ["policy": "count"]) }))]
                )
                let app = try ExampleApp(socket: socket, name: name)
                #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
                apps[name] = app
            }
            for name in Self.sleepers {
                #expect(try apps[name]!.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
                try waitForApp(system, name, "state", "suspended")
            }
            // Their states on disk before the first kill -9: they go with the next commit, made now.
            try commitUnhurriedWrites(system)
            return apps
        }

        let tally = Tally()
        let stop = NSLock()
        nonisolated(unsafe) var stopping = false
        let producers = DispatchGroup()
        for producer in 0..<3 {
            producers.enter()
            let thread = Thread {
                defer { producers.leave() }
                var random = SystemRandomNumberGenerator()
                var client: VarlinkClient?
                while !stop.withLock({ stopping }) {
                    // No daemon listens while one is being started again: the producer tries again shortly. A sleep,
                    // not a wait: a producer has no deadline, it runs until the test stops it.
                    guard let connected = client ?? (try? testClient(socket, timeout: .seconds(5))) else {
                        usleep(10_000)
                        continue
                    }
                    client = connected
                    // A window of posts in one write: a kill cuts through the middle of a batch.
                    var window: [String] = []
                    var burst: [UInt8] = []
                    for _ in 0..<Int.random(in: 1...32, using: &random) {
                        let app = (Self.sleepers + [Self.live]).randomElement(using: &random)!
                        let kind = Self.kinds.randomElement(using: &random)!
                        window.append(app + " " + kind)
                        VarlinkCall(
                            method: "io.coalesced.App.Post",
                            parameters: ["target": .string(app), "kind": .string(kind), "payload": ["producer": .int(Int64(producer))]]
                        ).message.write(to: &burst)
                        burst.append(0)
                    }
                    var answered = 0
                    do {
                        try connected.sendRaw(burst)
                        for key in window {
                            let reply = try connected.receiveReply()
                            answered += 1
                            if let error = reply.error { tally.fail("\(key): \(error)") } else { tally.answer(key) }
                        }
                    } catch {
                        for key in window.dropFirst(answered) { tally.cutOff(key) }  // sent, perhaps committed, never answered
                        client = nil
                    }
                }
            }
            thread.start()
        }

        let daemons = try await onThread { () -> [DaemonProcess] in
            var daemons = [first]
            for _ in 0..<6 {
                // A sleep, not a wait: the kills come at random moments, whatever the producers are doing.
                usleep(UInt32.random(in: 300_000...900_000))
                let next = try daemons.last!.restarted(configuration: cooperative)
                try next.waitUntilReady()
                daemons.append(next)
            }
            // The producers get posts through to the last daemon too.
            let answered = tally.total
            try waitUntil("100 more posts answered by the last daemon (\(tally.total - answered) so far)") {
                tally.total >= answered + 100
            }
            return daemons
        }
        stop.withLock { stopping = true }
        try await onThread {
            guard producers.wait(timeout: .now() + 20) == .success else { throw SupportError("the producers did not stop within 20 s") }
        }

        print("crash test: \(tally.total) posts answered, \(tally.unknown.values.reduce(0, +)) cut off by 6 kills")
        #expect(tally.unexpected.isEmpty, "\(tally.unexpected.prefix(3))")
        #expect(tally.total > 1000, "the producers got thousands of posts through: \(tally.total)")
        try await onThread {
            let system = try testClient(socket)
            // The apps never stopped: each attached again to the last daemon, in the state it had.
            for name in Self.sleepers + [Self.live] {
                let app = try waitForApp(system, name, "attached", true)
                #expect(app["pid"] == .int(Int64(apps[name]!.child.pid)), "\(name) is the same process")
            }
            #expect(apps[Self.live]!.unreadCallbacks.isEmpty, "the live app was never launched again")
            let live = apps[Self.live]!.eventSequences
            #expect(!live.isEmpty)
            #expect(zip(live, live.dropFirst()).allSatisfy { $0 < $1 }, "numbers go upwards through every restart: \(live)")

            // Each suspended app, woken now, receives one event per kind whose count is every answered post and
            // nothing beyond what was sent, numbered upwards.
            for name in Self.sleepers {
                let app = apps[name]!
                #expect(app.unreadCallbacks.isEmpty, "\(name) was never launched again")
                _ = try system.call("io.coalesced.System.Activate", ["app": .string(name)])
                #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
                let posted = Self.kinds.filter { tally.answered(name + " " + $0) + tally.cutOff(of: name + " " + $0) > 0 }
                let events = try app.events(atLeast: posted.count)
                for kind in Self.kinds {
                    let key = name + " " + kind
                    let line = events.first { $0.hasPrefix("event \(kind) count=") }
                    let count = line.flatMap { Int($0.split(separator: " ")[2].dropFirst("count=".count)) } ?? 0
                    #expect(count >= tally.answered(key), "\(key): \(count) delivered, \(tally.answered(key)) answered: an answered post was lost")
                    #expect(
                        count <= tally.answered(key) + tally.cutOff(of: key),
                        "\(key): \(count) delivered, \(tally.answered(key)) answered + \(tally.cutOff(of: key)) cut off: invented"
                    )
                }
                #expect(events.count == posted.count, "one event per kind: \(events)")
                let sequences = app.eventSequences
                #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "numbers go upwards: \(sequences)")
            }
        }
        try await onThread { for app in apps.values { app.kill() } }
        daemons.last!.signal(SIGKILL)
    }
}
