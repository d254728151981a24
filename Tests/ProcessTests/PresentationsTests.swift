import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// io.coalesced.Notifications.Presentations on the real daemon, read by a raw client: what an agent that connects
/// is sent of what its user missed (notifications that fell due while the daemon was killed, or while no agent was
/// connected), exactly once across agents and restarts; and a reader that does not read, ended with AgentOverrun.
@Suite struct PresentationsTests {
    static let app = "org.example.alarm"

    static func schedule(_ client: VarlinkClient, _ request: JSONObject) throws {
        _ = try client.call("io.coalesced.Notifications.Schedule", ["app": .string(Self.app), "request": .object(request)])
    }

    /// A Presentations stream whose first, empty reply has been read.
    static func stream(_ socket: String) throws -> VarlinkClient {
        let client = try testClient(socket, timeout: .seconds(60))
        try client.send(VarlinkCall(method: "io.coalesced.Notifications.Presentations", more: true))
        let first = try client.receiveReply()
        #expect(first.error == nil && first.continues && first.parameters.isEmpty, "\(first)")
        return client
    }

    /// The id of the stream's next presentation.
    static func next(_ stream: VarlinkClient) throws -> String {
        let reply = try stream.receiveReply()
        guard reply.error == nil, reply.continues, let presentation = reply.parameters["presentation"]?.objectValue else {
            throw SupportError("not a presentation: \(reply)")
        }
        #expect(presentation["app"] == .string(Self.app))
        return presentation["id"]?.stringValue ?? "?"
    }

    /// Schedules a notification presented at once and returns the ids each stream reads up to it, without it: what
    /// came before it on that stream.
    static func probe(_ client: VarlinkClient, _ id: String, _ streams: [VarlinkClient]) throws -> [[String]] {
        try Self.schedule(client, ["id": .string(id), "content": ["title": .string(id)]])
        return try streams.map { stream in
            var before: [String] = []
            while true {
                let next = try Self.next(stream)
                if next == id { return before }
                before.append(next)
            }
        }
    }

    static func ids(_ delivered: [JSONValue]) -> [String] { delivered.compactMap { $0["id"]?.stringValue } }

    @Test func whatFellDueWhileTheDaemonWasKilledReachesTheFirstAgentOnceAndNoOtherAgain() async throws {
        let first = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try first.waitUntilReady() }
        let due = Date().timeIntervalSince1970 + 3
        try await onThread {
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            // Presented at once, while no agent is connected.
            try Self.schedule(client, ["id": "early", "content": ["title": "Early"]])
            // Due while the daemon is down (or, on a slow machine, before it is killed: no agent hears of them
            // either way).
            for (index, id) in ["alarm", "second", "removed", "answered"].enumerated() {
                try Self.schedule(client, [
                    "id": .string(id), "trigger": ["at": .double(due + Double(index) * 0.1)], "late": "deliver",
                    "content": ["title": .string(id)],
                ])
            }
        }
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }
        try await onThread { try waitUntil("the alarms to fall due", timeout: .seconds(20)) { Date().timeIntervalSince1970 > due + 1 } }
        let second = try await onThread { try first.restartedWhenReady(configuration: noDeadlines) }
        try await onThread {
            let client = try testClient(second.socketPath)
            func delivered() throws -> [String] {
                Self.ids(try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(Self.app)])["delivered"]?.arrayValue ?? [])
            }
            try waitUntil("the start to present what fell due") { try delivered().count == 5 }
            #expect(try delivered() == ["early", "alarm", "second", "removed", "answered"])
            // Taken off the list, or answered: the desktop owes them nothing.
            _ = try client.call("io.coalesced.Notifications.RemoveDelivered", ["app": .string(Self.app), "ids": ["removed"]])
            _ = try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "answered", "action": "dismiss"])

            // The first agent gets what its user missed, oldest first, behind its first reply and before what is
            // presented after it connected.
            let agent = try Self.stream(second.socketPath)
            #expect(try Self.probe(client, "probe-1", [agent]) == [["early", "alarm", "second"]])
            // A second agent of the same user gets none of it again.
            let another = try Self.stream(second.socketPath)
            #expect(try Self.probe(client, "probe-2", [agent, another]) == [[], []])
            // Nor does an agent after a restart: what was sent is kept, a write after it was sent (a kill -9 before
            // that write shows it once more rather than never). A later write on disk is one after it.
            _ = try client.call("io.coalesced.Notifications.SetBadge", ["app": .string(Self.app), "badge": 0])
            let third = try second.restartedWhenReady(configuration: noDeadlines)
            let after = try Self.stream(third.socketPath)
            let again = try testClient(third.socketPath)
            #expect(try Self.probe(again, "probe-3", [after]) == [[]])
            third.signal(SIGKILL)
        }
    }

    @Test func whatIsPresentedWhileNoAgentIsConnectedReachesTheNextOne() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            // Shown to an agent, which then goes away; what comes after it waits for the next.
            do {
                let agent = try Self.stream(daemon.socketPath)
                #expect(try Self.probe(client, "seen", [agent]) == [[]])
            }
            try waitUntil("the daemon to see the agent go", timeout: .seconds(20)) {
                daemon.output.contains("A presentation agent went away")
            }
            for index in 1...3 { try Self.schedule(client, ["id": .string("while-away-\(index)"), "content": ["title": "Away"]]) }
            let next = try Self.stream(daemon.socketPath)
            #expect(try Self.probe(client, "back", [next]) == [["while-away-1", "while-away-2", "while-away-3"]])
        }
        daemon.signal(SIGKILL)
    }

    @Test func theNewestOfManyMissedAreSentBoundedAndTheRestStayListed() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines + "[Notifications]\nMaxDelivered=100\nPresentationBurst=1000\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            for index in 1...70 { try Self.schedule(client, ["id": .string("m\(index)"), "content": ["title": "Many"]]) }
            let agent = try Self.stream(daemon.socketPath)
            #expect(try Self.probe(client, "last", [agent]) == [(7...70).map { "m\($0)" }])
            let delivered = try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(Self.app)])
            #expect(delivered["delivered"]?.arrayValue?.count == 71)
            // The older ones are not sent to the next agent either.
            let another = try Self.stream(daemon.socketPath)
            #expect(try Self.probe(client, "later", [another]) == [[]])
        }
        daemon.signal(SIGKILL)
    }

    /// A reader that does not read while many presentations are made, and then does, well after it was ended:
    /// every presentation sent before, in order, then AgentOverrun with the limit, then the end of the connection.
    @Test func aReaderThatDoesNotReadGetsEveryPresentationThenAgentOverrunThenTheEnd() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines + "[Notifications]\nMaxContentSize=64K\nPresentationBurst=1000\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            let reader = try Self.stream(daemon.socketPath)
            let body = String(repeating: "b", count: 60_000)
            // 2.4 MB: past the kernel's buffer and the daemon's bound of 1 MiB unread.
            for index in 0..<40 {
                try Self.schedule(client, ["id": .string("n\(index)"), "content": ["title": "Flood", "body": .string(body)]])
            }
            try waitUntil("the daemon to end the reader", timeout: .seconds(30)) {
                daemon.output.contains("did not read its presentations and was ended")
            }
            // 45 s without reading, well within the two minutes a reader ended so is kept while it reads nothing.
            // A sleep, not a wait: the pause is the reader's behaviour under test.
            sleep(45)
            var received: [String] = []
            while true {
                let reply = try reader.receiveReply()
                if let error = reply.error {
                    #expect(error == "io.coalesced.Notifications.AgentOverrun")
                    #expect(reply.parameters["limit"] == .int(1 << 20))
                    break
                }
                received.append(reply.parameters["presentation"]?["id"]?.stringValue ?? "?")
            }
            #expect(received == received.indices.map { "n\($0)" }, "in order, none missing: \(received)")
            #expect(received.count >= 17, "the bound's worth at least: \(received.count)")
            #expect(reader.waitForClose(timeout: .seconds(10)), "the connection ends after the error")
        }
        daemon.signal(SIGKILL)
    }
}

/// The real coalesce-notify-agent, started after a daemon that was killed while an alarm fell due was started again:
/// the alarm reaches the desktop (python-dbusmock's notification server on a private session bus).
@Suite struct NotifyAgentMissedTests {
    @Test func anAlarmThatFellDueWhileTheDaemonWasKilledIsShownWhenTheAgentStarts() async throws {
        let first = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try first.waitUntilReady() }
        let due = Date().timeIntervalSince1970 + 3
        try await onThread {
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(PresentationsTests.app)])
            try PresentationsTests.schedule(client, [
                "id": "wake", "trigger": ["at": .double(due)], "style": "alert", "content": ["title": "Wake up"],
            ])
        }
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }
        try await onThread { try waitUntil("the alarm to fall due", timeout: .seconds(20)) { Date().timeIntervalSince1970 > due + 1 } }
        let second = try await onThread { try first.restartedWhenReady(configuration: noDeadlines) }
        try await onThread {
            let bus = try SessionBus()
            let mock = try NotificationServerMock(on: bus, capabilities: ["actions", "body"])
            let client = try testClient(second.socketPath)
            try waitUntil("the start to present the alarm") {
                try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(PresentationsTests.app)])["delivered"]?
                    .arrayValue?.count == 1
            }
            let agent = try WatchedProcess(
                BuildProducts.path(of: "coalesce-notify-agent"),
                ["--socket", second.socketPath],
                environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address]
            )
            let call = try waitUntil("the Notify of the alarm") { mock.notifyCalls.first }
            #expect(call.contains(#"Notify "org.example.alarm" 0 "" "Wake up""#), "\(call)")
            agent.child.signal(SIGTERM)
            #expect(agent.child.wait(timeout: .seconds(10)) == 0)
            #expect(mock.notifyCalls.count == 1)
        }
        second.signal(SIGKILL)
    }
}
