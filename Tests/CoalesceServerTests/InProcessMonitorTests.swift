@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

/// Monitors (`io.coalesced.System.Monitor`) on the manager in process: transitions, posts held and sent,
/// deliveries, acknowledgements, attaches and detaches, filtered by app and by kind (``MonitorFilter``, as the call
/// makes it from its parameters), and a monitor that stops reading. Each is a ``MonitorStream``; the apps are
/// ``TestApp``s. The parameters' checks and `coalescectl monitor` are tested end to end, in `ProcessTests`.
@Suite struct InProcessMonitorTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"
    static let other = "org.example.other"

    /// A transition as one line: `org.example.mail notRunning>inactive launch`.
    static func transition(_ record: JSONValue) -> String {
        let field = { (name: String) in record[name]?.stringValue ?? "?" }
        return "\(field("app")) \(field("from"))>\(field("to")) \(field("reason"))"
    }

    /// Records written out as a monitor sends them, without their times, as lines (``MonitorStream/line(_:)``).
    static func lines(_ records: [(name: String, record: JSONObject)]) -> [String] {
        records.map { MonitorStream.line(($0.name, .object($0.record))) }
    }

    @Test func theProcessExitingMeansNotRunningAndMonitorsSeeEveryTransition() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let monitor = try await fixture.monitor()
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            // The process ends (kill -9): its connection closes.
            app.process.exit()
            try await app.hangUp()
            #expect(try app.state == .notRunning)
            let seen = try await monitor.read { $0.count >= 3 }
            #expect(seen.allSatisfy { $0.name == "transition" })
            #expect(
                seen.map { Self.transition($0.record) } == [
                    "org.example.mail notRunning>inactive launch", "org.example.mail inactive>active launch",
                    "org.example.mail active>notRunning processExited",
                ]
            )
        }
    }

    /// A monitor whose client reads nothing while thousands of transitions happen: what it was sent and not read
    /// passes the bound, and the monitor is ended with MonitorOverrun after the records it was sent; the daemon
    /// serves on.
    @Test func aMonitorThatDoesNotReadIsEndedInsteadOfGrowingTheDaemon() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            for name in [Self.mail, Self.maps] { try await fixture.register(name) }
            let mail = try await fixture.attach(Self.mail)
            let maps = try await fixture.attach(Self.maps)
            #expect(try await mail.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"])
            #expect(try await maps.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try mail.acknowledge()
            try maps.acknowledge()
            // Its client stops reading after the first reply: what it is sent piles up unwritten. Each Activate is four
            // transitions: 4,000 of them are more than the 1 MiB bound.
            let monitor = try await fixture.monitor(reading: false)
            let switches = 4000
            for index in 0..<switches {
                _ = try fixture.manager.activate(name: index % 2 == 0 ? Self.mail : Self.maps)
            }
            // Now read: the transitions that were sent, then the error that ended the monitor.
            try await monitor.resumeReading()
            let records = try await monitor.records()
            let ended = try #require(monitor.ended, "the monitor was not ended")
            #expect(ended.error == "io.coalesced.System.MonitorOverrun")
            #expect(ended.parameters["bound"] == 1_048_576)
            #expect(records.allSatisfy { $0.name == "transition" })
            #expect(records.count > 1000 && records.count < switches * 4, "\(records.count) of \(switches * 4)")
            #expect(fixture.manager.count == 2, "still serving")
            #expect(try fixture.manager.activate(name: Self.mail).state == .active)
        }
    }

    @Test func aMonitorSeesAnAppsTrafficAndNothingOfAnotherApp() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let kinds: JSONValue = ["mail.received": ["policy": "latest"], "badge": ["policy": "sum", "field": "unread"]]
            for name in [Self.mail, Self.other] { try await fixture.register(name, kinds: kinds) }
            let uid: UInt32 = 0
            let watch = try await fixture.monitor(
                MonitorFilter(records: [.transitions, .traffic], apps: [try AppName(Self.mail)])
            )
            let badges = try await fixture.monitor(MonitorFilter(records: .traffic, kinds: [try EventKind("badge")]))
            // A client of before: no parameters, transitions only.
            let transitions = try await fixture.monitor()

            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            let pid = Int64(app.process.pid)
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)

            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 1], uid: uid) == false)
            #expect(try await fixture.post(Self.mail, "badge", ["unread": 2], uid: uid) == false)
            #expect(try await fixture.post(Self.other, "badge", ["unread": 5], uid: uid) == false)
            #expect(try await fixture.post(Self.other, "mail.received", ["id": 9], uid: uid) == false)
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.replies(atLeast: 4).compactMap { $0["parameters"]?["callback"] }
            #expect(
                woken.map { $0["kind"] }
                    == ["lifecycle.willEnterForeground", "lifecycle.didBecomeActive", "mail.received", "badge"]
            )
            try app.acknowledge()
            #expect(try fixture.manager.queue(of: Self.mail).unacknowledged == 0)
            let sequences = woken.suffix(2).map { $0["seq"]?.intValue ?? 0 }
            // Sent at once to the active app: delivered, with the number it went out with.
            #expect(try await fixture.post(Self.mail, "mail.received", ["id": 3], uid: uid) == true)
            let sent = try #require(try await app.callbacks().first?["seq"]?.intValue)
            app.process.exit()
            try await app.hangUp()
            #expect(try app.state == .notRunning)

            let records = try await watch.read { $0.contains { $0.record["reason"] == "processExited" } }
                .map(MonitorStream.line)
            let mail = JSONValue.string(Self.mail)
            let expected = Self.lines([
                ("attach", ["app": mail, "pid": .int(pid)]),
                ("post", ["target": mail, "app": mail, "kind": "mail.received", "delivered": false, "uid": .int(Int64(uid))]),
                ("post", ["target": mail, "app": mail, "kind": "badge", "delivered": false, "uid": .int(Int64(uid))]),
                ("delivery", ["app": mail, "kind": "mail.received", "seq": .int(sequences[0]), "count": 1]),
                ("delivery", ["app": mail, "kind": "badge", "seq": .int(sequences[1]), "count": 1]),
                ("acknowledgement", ["app": mail, "seq": .int(sequences[1])]),
                (
                    "post",
                    [
                        "target": mail, "app": mail, "kind": "mail.received", "delivered": true, "seq": .int(sent),
                        "uid": .int(Int64(uid)),
                    ]
                ),
                ("delivery", ["app": mail, "kind": "mail.received", "seq": .int(sent), "count": 1]),
                // The stream closed: then the lifecycle hears that the process exited.
                ("detach", ["app": mail, "pid": .int(pid)]),
                ("transition", ["app": mail, "from": "active", "to": "notRunning", "reason": "processExited"]),
            ])
            // In this order; the lifecycle's transitions and acknowledgements of callbacks come in between.
            var rest = records[...]
            for line in expected {
                guard let found = rest.firstIndex(of: line) else {
                    Issue.record("no \(line) in order among:\n\(records.joined(separator: "\n"))")
                    break
                }
                rest = rest[(found + 1)...]
            }
            #expect(records.first == expected[0], "the attach comes first")
            #expect(!records.contains { $0.contains(Self.other) }, "nothing of another app: \(records)")

            // The kind filter: badge's posts and deliveries, of every app, and nothing without a kind.
            let badgeRecords = try await badges.read { $0.count >= 3 }.map(MonitorStream.line)
            let other = JSONValue.string(Self.other)
            #expect(
                badgeRecords
                    == Self.lines([
                        ("post", ["target": mail, "app": mail, "kind": "badge", "delivered": false, "uid": .int(Int64(uid))]),
                        ("post", ["target": other, "app": other, "kind": "badge", "delivered": false, "uid": .int(Int64(uid))]),
                        ("delivery", ["app": mail, "kind": "badge", "seq": .int(sequences[1]), "count": 1]),
                    ])
            )
            // The monitor without parameters got the transitions only: the last one is the process's end.
            let plain = try await transitions.read { $0.contains { $0.record["reason"] == "processExited" } }
                .map(MonitorStream.line)
            #expect(plain == records.filter { $0.hasPrefix("transition ") }, "\(plain)")
        }
    }
}
