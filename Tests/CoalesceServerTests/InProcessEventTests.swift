@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import CoalesceWire
import Testing
import Varlink

/// Events posted to running apps, held and coalesced for suspended ones: the manager in process on a manual clock
/// (``withManager(configuration:directory:processes:units:logs:_:)``), its app a ``TestApp`` that reads its stream
/// and acknowledges what it read, as the example app does. What the app is sent is written as the example app
/// prints it, as in the end-to-end `EventTests`.
@Suite struct InProcessEventTests {
    static let mail = "org.example.mail"

    /// Registers the app with a policy for each kind and attaches it, launched into the foreground.
    func activeApp(_ fixture: ManagerFixture) async throws -> TestApp {
        let kinds: JSONValue = [
            "mail.received": ["policy": "latest"], "mail.first": ["policy": "first"],
            "log.error": ["policy": "count"], "badge": ["policy": "sum", "field": "unread"],
            "weather": ["policy": "merge"], "temperature": ["policy": "netChange"],
            "chat.message": ["policy": "queue", "bound": 2],
        ]
        try await fixture.register(Self.mail, kinds: kinds)
        let app = try await fixture.attach(Self.mail)
        #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        return app
    }

    @Test func eachPolicyCoalescesToItsExactResultOnWake() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let app = try await self.activeApp(fixture)
            // While active, an event arrives at once; it is also what netChange compares against later.
            #expect(try await fixture.post(Self.mail, "temperature", ["celsius": 20]) == true)
            #expect(try await app.sent().events == [#"event temperature count=1 payload={"celsius":20}"#])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)

            let posts: [(String, JSONValue)] = [
                ("mail.received", ["id": 1]), ("badge", ["unread": 2]), ("temperature", ["celsius": 25]),
                ("log.error", ["line": "a"]), ("mail.first", ["id": 10]), ("weather", ["wind": 3, "sky": "grey"]),
                ("chat.message", ["text": "hi"]), ("mail.received", ["id": 2]), ("badge", ["unread": 3]),
                ("log.error", ["line": "b"]), ("mail.first", ["id": 11]), ("weather", ["sky": "blue"]),
                ("chat.message", ["text": "are you there"]), ("temperature", ["celsius": 20]),
                ("chat.message", ["text": "hello?"]), ("log.error", ["line": "c"]),
                ("dynamic.kind", ["v": 1]),
            ]
            for (kind, payload) in posts {
                #expect(try await fixture.post(Self.mail, kind, payload) == false, "\(kind) is held")
            }
            #expect(try await app.sent() == TestApp.Sent(), "a suspended app receives nothing")

            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent(untilEvents: 9)
            #expect(woken.callbacks == ["willEnterForeground", "didBecomeActive"])
            #expect(
                woken.events == [
                    #"event mail.received count=2 payload={"id":2}"#,
                    #"event badge count=2 payload={"unread":5}"#,
                    // temperature: back to 20, what the app had before it was suspended: nothing to deliver.
                    #"event log.error count=3 payload=-"#,
                    #"event mail.first count=2 payload={"id":10}"#,
                    #"event weather count=2 payload={"sky":"blue","wind":3}"#,
                    #"event chat.message count=1 payload={"text":"are you there"}"#,
                    #"event chat.message count=1 payload={"text":"hello?"}"#,
                    #"event chat.message count=1 payload=- dropped=1"#,
                    #"event dynamic.kind count=1 payload={"v":1}"#,
                ]
            )
            #expect(try await app.sent() == TestApp.Sent(), "nothing more")
            // The callbacks of the wake come first, then the events; numbers always increase (``TestApp`` checks).
        }
    }

    /// Every state that runs code receives at once: active, inactive (an interruption holds it), and background
    /// (a background mode keeps it there); each event as posted, in order.
    @Test func inactiveAndBackgroundAppsReceiveAtOnce() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail, traits: AppTraits(backgroundModes: ["audio"]))
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.interrupt(name: nil, begins: true)
            #expect(try await app.sent().callbacks == ["willResignActive"])
            #expect(try await fixture.post(Self.mail, "call.started", ["n": 1]) == true, "inactive: sent at once")
            _ = try fixture.manager.interrupt(name: nil, begins: false)
            _ = try fixture.manager.deactivate(name: nil)
            let moved = try await app.sent()
            #expect(moved.callbacks == ["didBecomeActive", "willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .background)
            #expect(try await fixture.post(Self.mail, "track.changed", ["n": 2]) == true, "background: sent at once")
            #expect(try await fixture.post(Self.mail, "track.changed", ["n": 3]) == true)
            let later = try await app.sent().events
            #expect(
                moved.events + later == [
                    #"event call.started count=1 payload={"n":1}"#, #"event track.changed count=1 payload={"n":2}"#,
                    #"event track.changed count=1 payload={"n":3}"#,
                ]
            )
            #expect(try app.state == .background)
        }
    }

    /// A held kind's event says when its first and its last post came (seconds since the epoch), on the wire as
    /// in `GetQueue`: the times of the wall clock, which the test moves.
    @Test func aWakesEventCarriesTheTimesOfItsFirstAndLastPost() async throws {
        try await withManager(configuration: try configuration(noDeadlines)) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            await fixture.clock.advance(to: .seconds(10))
            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 1]) == false)
            await fixture.clock.advance(to: .milliseconds(10_200))
            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 2]) == false)
            let first = ManualClock.wallStart + 10
            let last = ManualClock.wallStart + 10.2
            let held = try #require(try fixture.manager.queue(of: Self.mail).held.first)
            #expect(held.kind.value == "mail.received" && held.slot.count == 2)
            #expect(abs(held.slot.first - first) < 1e-6, "held: first post at \(held.slot.first), not \(first)")
            #expect(abs(held.slot.last - last) < 1e-6, "held: last post at \(held.slot.last), not \(last)")
            // The app, launched by its attach: the held event follows the callbacks.
            let app = try await fixture.attach(Self.mail)
            let event = try #require(try await app.callbacks().first { $0["kind"] == "mail.received" })
            #expect(event["count"] == 2)
            let posted = (event["firstPosted"]?.doubleValue ?? 0, event["lastPosted"]?.doubleValue ?? 0)
            #expect(abs(posted.0 - first) < 1e-6, "first post at \(posted.0), not \(first)")
            #expect(abs(posted.1 - last) < 1e-6, "last post at \(posted.1), not \(last)")
        }
    }

    /// An app that reads its stream and acknowledges only its launch is sent 4,096 events at once, then has the
    /// rest held (of one kind: one slot) until it acknowledges; what was held then comes as one event.
    @Test func anAppThatDoesNotAcknowledgeHasItsEventsHeldPastTheBound() async throws {
        try await withManager(configuration: try configuration(noDeadlines)) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            let posts = (0..<5000).map { (kind: "tick", payload: JSONValue.object(["n": .int(Int64($0))])) }
            let sentAtOnce = try await fixture.post(Self.mail, each: posts).count { $0 }
            #expect(sentAtOnce == 4096, "sent at once up to the bound")
            let held = try fixture.manager.queue(of: Self.mail).held
            #expect(
                held.count == 1 && held.first?.slot.count == 5000 - 4096,
                "the rest held, one kind: \(held.map(\.slot.count))"
            )
            let first = try await app.callbacks()
            #expect(first.count == 4096)
            try app.acknowledge()
            let after = try await app.sent(untilEvents: 1)
            #expect(
                after.events == ["event tick count=\(5000 - 4096) payload={\"n\":4999}"],
                "what was held comes as one event for the kind"
            )
            #expect(try await app.sent() == TestApp.Sent())
        }
    }

    @Test func volatileKindsAreHeldInMemoryOnly() async throws {
        let directory = try TemporaryDirectory()
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            try await fixture.register(
                Self.mail, kinds: ["cursor": ["policy": "latest", "volatile": true], "mail": ["policy": "count"]]
            )
            // A registration that leaves the kinds out keeps them as declared, volatility included.
            try await fixture.register(Self.mail, traits: AppTraits(exitsOnSuspend: false))
            #expect(try await fixture.post(Self.mail, "cursor", ["x": 1]) == false)
            #expect(try await fixture.post(Self.mail, "cursor", ["x": 2]) == false)
            #expect(try await fixture.post(Self.mail, "mail", [:]) == false)
            let held = try fixture.manager.queue(of: Self.mail).held
            #expect(held.map(\.kind.value) == ["cursor", "mail"])
            #expect(held.first?.slot.policy == .latest)
            // As GetQueue writes it.
            #expect(held.first?.slot.policy.wire == ["policy": "latest"])
        }
        // A restart: a new manager on the same state directory.
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            let held = try fixture.manager.queue(of: Self.mail).held
            #expect(held.map(\.kind.value) == ["mail"], "the volatile kind died with the daemon")
            // The declaration itself is durable.
            let app = try await fixture.attach(Self.mail)
            let launched = try await app.sent(untilEvents: 1)
            #expect(launched.callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(launched.events == ["event mail count=1 payload=-"])
            try app.acknowledge()
            #expect(try await fixture.post(Self.mail, "cursor", ["x": 3]) == true)
            #expect(try await app.sent().events == [#"event cursor count=1 payload={"x":3}"#])
        }
    }

    /// Events sent to an app that runs on through a restart of the daemon and not acknowledged come again once its
    /// process attaches again, numbered past everything sent before, with no launch in front of them; acknowledged
    /// ones never do.
    @Test func unacknowledgedEventsComeAgainWhenTheProcessAttachesAfterARestart() async throws {
        let directory = try TemporaryDirectory()
        let processes = FakeProcesses()
        // The app's process, which outlives each start of the daemon.
        let process = processes.spawn()
        let configuration = try configuration(noDeadlines)
        func seq(_ callback: JSONValue) -> UInt64 { UInt64(callback["seq"]?.intValue ?? 0) }
        let old = try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws -> [UInt64] in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail, process: process)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 1]) == true)
            #expect(try await fixture.post(Self.mail, "badge", ["unread": 2]) == true)
            let events = try await app.callbacks()
            #expect(events.map { $0["kind"] } == ["mail.received", "badge"])
            return events.map(seq)
        }
        let again = try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws -> [UInt64] in
            #expect(try fixture.manager.get(Self.mail).state == .active)
            let app = try await fixture.attach(Self.mail, process: process)
            let replies = try await app.replies(atLeast: 3)
            #expect(replies.first?["parameters"]?["state"] == "active", "taken up as it was: no launch")
            let events = replies.dropFirst().compactMap { $0["parameters"]?["callback"] }
            #expect(events.map { $0["kind"] } == ["mail.received", "badge"], "both come again, in order")
            try app.acknowledge(upTo: seq(events.last ?? .null))
            #expect(try await fixture.post(Self.mail, "weather", ["sky": "clear"]) == true)
            #expect(try await app.kinds() == ["weather"])
            return events.map(seq)
        }
        #expect(
            again.allSatisfy { seq in old.allSatisfy { $0 < seq } }, "numbers never go backwards: \(old) then \(again)"
        )
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            let app = try await fixture.attach(Self.mail, process: process)
            let replies = try await app.replies(atLeast: 2)
            #expect(replies.first?["parameters"]?["state"] == "active")
            // Only the event never acknowledged comes again; a new post follows it.
            #expect(replies.dropFirst().compactMap { $0["parameters"]?["callback"]?["kind"] } == ["weather"])
            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 3]) == true)
            #expect(try await app.kinds() == ["mail.received"])
        }
        #expect(process.signals.isEmpty, "no restart signalled the process")
    }
}
