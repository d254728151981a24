@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

/// Events across restarts of the daemon, on the manager in process: what was held, sent and acknowledged is taken
/// up from the store by the next manager on the same state directory and ``FakeProcesses``
/// (``withManager(configuration:directory:processes:units:logs:_:)`` called again). Those restarts are clean stops;
/// what a `kill -9` of the real daemon leaves on disk is tested end to end, in `EventTests`.
@Suite struct InProcessEventRestartTests {
    static let mail = "org.example.mail"

    /// The kinds the example app's tests declare, one per policy.
    static let kinds: JSONValue = [
        "mail.received": ["policy": "latest"], "mail.first": ["policy": "first"],
        "log.error": ["policy": "count"], "badge": ["policy": "sum", "field": "unread"],
        "weather": ["policy": "merge"], "temperature": ["policy": "netChange"],
        "chat.message": ["policy": "queue", "bound": 2],
    ]

    /// A launch by `process` attaching: its callbacks read and acknowledged.
    static func launched(_ fixture: ManagerFixture, process: FakeProcess? = nil) async throws -> TestApp {
        let app = try await fixture.attach(Self.mail, process: process)
        let launch = try await app.sent().callbacks
        #expect(launch == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        return app
    }

    /// Registers mail with its kinds, launches it and sends it home until it is suspended.
    static func suspendedApp(_ fixture: ManagerFixture, process: FakeProcess? = nil) async throws -> TestApp {
        try await fixture.register(Self.mail, kinds: Self.kinds)
        let app = try await Self.launched(fixture, process: process)
        _ = try fixture.manager.deactivate(name: Self.mail)
        let home = try await app.sent().callbacks
        #expect(home == ["willResignActive", "didEnterBackground"])
        try app.acknowledge()
        #expect(try app.state == .suspended)
        return app
    }

    /// The app's process ends, and with it its stream.
    static func dies(_ app: TestApp) async throws {
        app.process.exit()
        try await app.hangUp()
        #expect(try app.state == .notRunning)
    }

    /// The events `app` is sent before a marker posted now: once the marker came, whatever the manager would have
    /// sent before it has come too.
    static func eventsBeforeAMarker(_ app: TestApp, _ fixture: ManagerFixture) async throws -> [String] {
        let sent = try await fixture.post(Self.mail, "test.marker", ["marker": true])
        #expect(sent, "the marker is sent at once")
        let events = try await app.sent(untilEvents: 1).events
        #expect(events.last == #"event test.marker count=1 payload={"marker":true}"#)
        return events.dropLast()
    }

    /// The first `count` callbacks and events `app` is sent after its attach's first reply, waiting for them.
    static func callbacks(_ app: TestApp, count: Int) async throws -> [JSONValue] {
        try await app.replies(atLeast: count + 1).compactMap { $0["parameters"]?["callback"] }
    }

    static func sequence(_ callback: JSONValue) -> Int64 { callback["seq"]?.intValue ?? -1 }

    /// A callback or event as one line: its kind, then an event's count and payload (`-` where it has none).
    static func line(_ callback: JSONValue) -> String {
        let kind = callback["kind"]?.stringValue ?? "?"
        guard let count = callback["count"]?.intValue else { return kind }
        let payload = callback["payload"].flatMap { $0 == .null ? nil : $0.jsonText } ?? "-"
        return "\(kind) count=\(count) \(payload)"
    }

    static let launch = ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"]

    /// Held events outlive the daemon and the app; an app that dies before acknowledging them gets them again at
    /// its next launch, numbered past what it was sent; acknowledged, they never come again.
    @Test func heldEventsSurviveARestartAndUnacknowledgedOnesComeAgain() async throws {
        let directory = try TemporaryDirectory()
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            let app = try await Self.suspendedApp(fixture)
            for id in 1...3 {
                let sent = try await fixture.post(Self.mail, "mail.received", ["id": .int(Int64(id))])
                #expect(!sent)
            }
            try await fixture.post(Self.mail, "badge", ["unread": 4])
            try await Self.dies(app)
        }
        let held = [#"mail.received count=3 {"id":3}"#, #"badge count=1 {"unread":4}"#]
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            // Launched again, and dead before it acknowledged anything past its launch.
            let dying = try await fixture.attach(Self.mail)
            let first = try await Self.callbacks(dying, count: 4)
            #expect(first.map(Self.line) == Self.launch + held)
            try dying.acknowledge(upTo: UInt64(Self.sequence(first[1])))
            try await Self.dies(dying)

            let again = try await fixture.attach(Self.mail)
            let second = try await Self.callbacks(again, count: 4)
            #expect(second.map(Self.line) == Self.launch + held, "what was not acknowledged comes again, in order")
            let before = first.map(Self.sequence).max() ?? 0
            #expect(second.allSatisfy { Self.sequence($0) > before }, "numbers never go backwards")
            try again.acknowledge()
            let unacknowledged = try fixture.manager.queue(of: Self.mail).unacknowledged
            #expect(unacknowledged == 0)
            try await Self.dies(again)
        }
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            let third = try await Self.launched(fixture)
            let events = try await Self.eventsBeforeAMarker(third, fixture)
            #expect(events.isEmpty, "acknowledged events never come again")
        }
    }

    /// What was held for a suspended app survives a restart of the daemon, and what is posted while its process has
    /// not attached again is held with it: on waking, after the callbacks, one event per kind for all of it.
    @Test func aSuspendedAppStaysSuspendedAcrossARestartAndWakesWithEverythingHeld() async throws {
        let (directory, processes) = (try TemporaryDirectory(), FakeProcesses())
        let process = processes.spawn()
        let configuration = try configuration(cooperative)
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            _ = try await Self.suspendedApp(fixture, process: process)
            let first = try await fixture.post(Self.mail, "mail.received", ["id": 1])
            let second = try await fixture.post(Self.mail, "badge", ["unread": 2])
            #expect(!first && !second)
        }
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            #expect(try fixture.manager.get(Self.mail).state == .suspended)
            // Posted before its process attached again, or after: held either way, while it is suspended.
            let before = try await fixture.post(Self.mail, "badge", ["unread": 3])
            #expect(!before)
            let app = try await fixture.attach(Self.mail, process: process)
            let attached = try await app.replies(atLeast: 1)
            #expect(attached.map { $0["parameters"]?["state"] } == ["suspended"], "taken up as it was, sent nothing")
            let after = try await fixture.post(Self.mail, "mail.received", ["id": 4])
            #expect(!after)
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent(untilEvents: 2)
            #expect(woken.callbacks == ["willEnterForeground", "didBecomeActive"])
            #expect(
                woken.events == [#"event mail.received count=2 payload={"id":4}"#, #"event badge count=2 payload={"unread":5}"#]
            )
        }
        #expect(process.signals.isEmpty)
    }

    /// A queue kind's entries are kept one by one and survive restarts of the daemon: the oldest past the bound are
    /// dropped, whichever run of the daemon held them, and the wake brings the newest in order, then how many went.
    @Test func aQueueKindKeepsItsNewestEntriesAcrossRestarts() async throws {
        let (directory, processes) = (try TemporaryDirectory(), FakeProcesses())
        let process = processes.spawn()
        let configuration = try configuration(cooperative)
        func post(_ fixture: ManagerFixture, _ numbers: ClosedRange<Int>) async throws {
            for number in numbers {
                let sent = try await fixture.post(Self.mail, "chat.message", ["n": .int(Int64(number))])
                #expect(!sent, "\(number) is held")
            }
        }
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            _ = try await Self.suspendedApp(fixture, process: process)  // chat.message is a queue of bound 2
            try await post(fixture, 1...3)
        }
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            try await post(fixture, 4...5)
        }
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            let held = try fixture.manager.queue(of: Self.mail).held.first { $0.kind.value == "chat.message" }
            #expect(held?.slot.count == 5)
            let app = try await fixture.attach(Self.mail, process: process)
            _ = try await app.replies(atLeast: 1)
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent(untilEvents: 3)
            #expect(woken.callbacks == ["willEnterForeground", "didBecomeActive"])
            #expect(
                woken.events == [
                    #"event chat.message count=1 payload={"n":4}"#, #"event chat.message count=1 payload={"n":5}"#,
                    "event chat.message count=3 payload=- dropped=3",
                ]
            )
        }
    }

    /// A netChange kind compares what is held with what the app last received, and that survives a restart: a
    /// temperature that went up and came back is no news to the relaunched app.
    @Test func netChangeComparesAgainstWhatTheAppReceivedBeforeARestart() async throws {
        let directory = try TemporaryDirectory()
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail, kinds: Self.kinds)
            let app = try await Self.launched(fixture)
            let sent = try await fixture.post(Self.mail, "temperature", ["celsius": 20])
            #expect(sent)
            let events = try await app.sent().events
            #expect(events == [#"event temperature count=1 payload={"celsius":20}"#])
            try app.acknowledge()
            try await Self.dies(app)
        }
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            for celsius in [25, 20] { try await fixture.post(Self.mail, "temperature", ["celsius": .int(Int64(celsius))]) }
            try await fixture.post(Self.mail, "mail.received", ["id": 1])
            let app = try await fixture.attach(Self.mail)
            let launch = try await app.sent(untilEvents: 1)
            #expect(launch.callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(launch.events == [#"event mail.received count=1 payload={"id":1}"#])
            try app.acknowledge()
            let later = try await Self.eventsBeforeAMarker(app, fixture)
            #expect(later.isEmpty, "the temperature came back to what the app last received: nothing")
        }
    }
}
