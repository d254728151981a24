import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The crash test: producers post to stopped apps while the daemon is killed with SIGKILL at random moments and
/// started again. When the apps run afterwards, every answered post must be in the counts they receive (none lost)
/// and nothing but the posts that were sent (none invented): for each kind, answered ≤ delivered ≤ answered + posts
/// whose answer the kill cut off.
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
    }

    @Test func killMinusNineLosesNoAnsweredPostAndInventsNone() async throws {
        let apps = ["org.crash.a", "org.crash.b", "org.crash.c"]
        let kinds = ["k1", "k2", "k3"]
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        let setup = try testClient(socket)
        for app in apps {
            _ = try setup.call(
                "io.coalesced.App.Register",
                ["name": .string(app), "kinds": .object(JSONObject(kinds.map { ($0, ["policy": "count"]) }))]
            )
        }

        let tally = Tally()
        let stop = NSLock()
        nonisolated(unsafe) var stopping = false
        var producers: [Thread] = []
        for producer in 0..<3 {
            let thread = Thread {
                var random = SystemRandomNumberGenerator()
                var client: VarlinkClient?
                while !stop.withLock({ stopping }) {
                    guard let connected = client ?? (try? testClient(socket, timeout: .seconds(5))) else {
                        usleep(10_000)
                        continue
                    }
                    client = connected
                    let app = apps.randomElement(using: &random)!
                    let kind = kinds.randomElement(using: &random)!
                    do {
                        _ = try connected.call(
                            "io.coalesced.App.Post",
                            ["target": .string(app), "kind": .string(kind), "payload": ["producer": .int(Int64(producer))]]
                        )
                        tally.answer(app + " " + kind)
                    } catch is VarlinkClientError {
                        tally.cutOff(app + " " + kind)  // sent, perhaps committed, never answered
                        client = nil
                    } catch {
                        tally.fail("\(error)")
                        client = nil
                    }
                }
            }
            thread.start()
            producers.append(thread)
        }

        let daemons = try await onThread { () -> [DaemonProcess] in
            var daemons = [first]
            for _ in 0..<6 {
                usleep(UInt32.random(in: 300_000...900_000))
                let next = try daemons.last!.restarted()
                try next.waitUntilReady()
                daemons.append(next)
            }
            usleep(500_000)
            return daemons
        }
        stop.withLock { stopping = true }
        while producers.contains(where: { !$0.isFinished }) { try await Task.sleep(for: .milliseconds(20)) }

        print("crash test: \(tally.total) posts answered, \(tally.unknown.values.reduce(0, +)) cut off by 6 kills")
        #expect(tally.unexpected.isEmpty, "\(tally.unexpected.prefix(3))")
        #expect(tally.total > 100, "the producers got posts through: \(tally.total)")
        // Each app, started now, receives one event per kind whose count is every answered post and nothing
        // beyond what was sent, numbered upwards.
        try await onThread {
            for app in apps {
                let example = try ExampleApp(socket: socket, name: app)
                #expect(try example.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
                let posted = kinds.filter { (tally.answered[app + " " + $0] ?? 0) + (tally.unknown[app + " " + $0] ?? 0) > 0 }
                let events = try example.events(atLeast: posted.count)
                for kind in kinds {
                    let line = events.first { $0.hasPrefix("event \(kind) count=") }
                    let count = line.flatMap { Int($0.split(separator: " ")[2].dropFirst("count=".count)) } ?? 0
                    let answered = tally.answered[app + " " + kind] ?? 0
                    let cutOff = tally.unknown[app + " " + kind] ?? 0
                    #expect(count >= answered, "\(app) \(kind): \(count) delivered, \(answered) answered: an answered post was lost")
                    #expect(count <= answered + cutOff, "\(app) \(kind): \(count) delivered, \(answered) answered + \(cutOff) cut off: invented")
                }
                #expect(events.count == posted.count, "one event per kind: \(events)")
                let sequences = example.eventSequences
                #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "numbers go upwards: \(sequences)")
            }
        }
        daemons.last!.signal(SIGKILL)
    }
}
