import CoalesceTestSupport
import Foundation
import Synchronization
import Testing
import Varlink

// Events across restarts: held and unacknowledged events kept on disk through kill -9, and what reaches the disk.
extension EventTests {
    @Test func heldEventsSurviveKillMinusNineAndUnacknowledgedOnesComeAgain() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        try await onThread {
            let client = try testClient(socket)
            let app = try self.suspendedApp(first, client)
            _ = try client.call("io.coalesced.System.Deactivate")
            try waitForApp(client, Self.mail, "state", "suspended")
            for id in 1...3 { _ = try post(client, Self.mail, "mail.received", ["id": .int(Int64(id))]) }
            _ = try post(client, Self.mail, "badge", ["unread": 4])
            app.kill()
        }
        let second = try await onThread { try first.restartedWhenReady() }
        try await onThread {
            // The app comes back and dies handling the first event, before acknowledging it.
            let dying = try self.relaunched(socket, arguments: ["--stall-on-event", "mail.received"])
            #expect(try dying.events(atLeast: 1) == [#"event mail.received count=3 payload={"id":3}"#])
            let firstSequence = dying.eventSequences.first!
            dying.kill()

            let again = try self.relaunched(socket)
            #expect(
                try again.events(atLeast: 2) == [
                    #"event mail.received count=3 payload={"id":3}"#, #"event badge count=1 payload={"unread":4}"#,
                ],
                "what was not acknowledged comes again, in order"
            )
            #expect(again.eventSequences.allSatisfy { $0 > firstSequence }, "numbers never go backwards")
            // Acknowledged now: a third attach gets nothing again.
            let client = try testClient(socket)
            try waitForAcknowledged(client, Self.mail)
            again.kill()
            let third = try self.relaunched(socket)
            #expect(try self.eventsBeforeAMarker(third, client).isEmpty, "acknowledged events never come again")
        }
        second.signal(SIGKILL)
    }

    /// Events sent to an app that runs on through a restart of the daemon (kill -9) and not acknowledged come again
    /// once its process attaches again, numbered past everything sent before, with no launch in front of them;
    /// acknowledged ones never do.
    @Test func unacknowledgedEventsComeAgainWhenTheProcessAttachesAfterARestart() async throws {
        let first = try DaemonProcess(configuration: noDeadlines)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        // The app is attached from this test's process, which outlives each daemon: it reads what comes and
        // acknowledges only what the test says.
        @Sendable func attach() throws -> VarlinkClient {
            let stream = try testClient(socket)
            try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(Self.mail)], more: true))
            return stream
        }
        @Sendable func next(_ stream: VarlinkClient) throws -> (kind: String, seq: Int64) {
            let callback = try stream.receiveReply().parameters["callback"]
            return (callback?["kind"]?.stringValue ?? "-", callback?["seq"]?.intValue ?? -1)
        }
        @Sendable func acknowledge(_ client: VarlinkClient, _ seq: Int64) throws {
            _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.mail), "seq": .int(seq)])
        }
        // The first stream stays open until that daemon is killed, as the app's process keeps it.
        let firstStream = OpenConnection()
        let old = try await onThread { () throws -> [Int64] in
            let client = try testClient(socket)
            let stream = try attachedFromThisProcess(socket, app: Self.mail)
            firstStream.client = stream
            #expect(try post(client, Self.mail, "mail.received", ["id": 1]) == true)
            #expect(try post(client, Self.mail, "badge", ["unread": 2]) == true)
            let events = [try next(stream), try next(stream)]
            #expect(events.map(\.kind) == ["mail.received", "badge"])
            // Nothing to wait for before the kill: each post was answered once on disk, with the app's state
            // (written, unhurried, before them) in the same commit.
            return events.map(\.seq)
        }
        let second = try await onThread { try first.restartedWhenReady(configuration: noDeadlines) }
        firstStream.client = nil
        let secondStream = OpenConnection()
        let again = try await onThread { () throws -> [Int64] in
            let client = try testClient(socket)
            #expect(try client.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]?["state"] == "active")
            let stream = try attach()
            secondStream.client = stream
            #expect(try stream.receiveReply().parameters["state"] == "active", "taken up as it was: no launch")
            let events = [try next(stream), try next(stream)]
            #expect(events.map(\.kind) == ["mail.received", "badge"], "both come again, in order")
            try acknowledge(client, events[1].seq)
            // Acknowledged: on disk with the next commit, which this post makes.
            #expect(try post(client, Self.mail, "weather", ["sky": "clear"]) == true)
            #expect(try next(stream).kind == "weather")
            return events.map(\.seq)
        }
        #expect(again.allSatisfy { seq in old.allSatisfy { $0 < seq } }, "numbers never go backwards: \(old) then \(again)")
        let third = try await onThread { try second.restartedWhenReady(configuration: noDeadlines) }
        secondStream.client = nil
        try await onThread {
            let client = try testClient(socket)
            let stream = try attach()
            #expect(try stream.receiveReply().parameters["state"] == "active")
            // Only the event never acknowledged comes again; a new post follows it.
            #expect(try next(stream).kind == "weather")
            #expect(try post(client, Self.mail, "mail.received", ["id": 3]) == true)
            #expect(try next(stream).kind == "mail.received")
        }
        third.signal(SIGKILL)
    }

    /// What was held for a suspended app survives a restart of the daemon, and what is posted while its process has
    /// not attached again is held with it: on waking, after the callbacks, one event per kind for all of it.
    @Test func aSuspendedAppStaysSuspendedAcrossARestartAndWakesWithEverythingHeld() async throws {
        let first = try DaemonProcess(configuration: cooperative)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        let app = try await onThread { () throws -> ExampleApp in
            let client = try testClient(socket)
            let app = try self.suspendedApp(first, client)
            _ = try client.call("io.coalesced.System.Deactivate")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try waitForApp(client, Self.mail, "state", "suspended")
            #expect(try post(client, Self.mail, "mail.received", ["id": 1]) == false)
            // Nothing to wait for before the kill: each post was answered once on disk, with the suspended state
            // (written, unhurried, before them) in the same commit.
            #expect(try post(client, Self.mail, "badge", ["unread": 2]) == false)
            return app
        }
        let second = try await onThread { try first.restartedWhenReady(configuration: cooperative) }
        try await onThread {
            let client = try testClient(socket)
            #expect(try client.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]?["state"] == "suspended")
            // Posted before its process attached again, or after: held either way, while it is suspended.
            #expect(try post(client, Self.mail, "badge", ["unread": 3]) == false)
            try waitForApp(client, Self.mail, "attached", true)
            #expect(try post(client, Self.mail, "mail.received", ["id": 4]) == false)
            _ = try client.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(
                try app.events(atLeast: 2) == [
                    #"event mail.received count=2 payload={"id":4}"#, #"event badge count=2 payload={"unread":5}"#,
                ]
            )
        }
        second.signal(SIGKILL)
    }

    /// A queue kind's entries are kept one by one and survive restarts of the daemon: the oldest past the bound are
    /// dropped, whichever run of the daemon held them, and the wake brings the newest in order, then how many went.
    @Test func aQueueKindKeepsItsNewestEntriesAcrossRestarts() async throws {
        let first = try DaemonProcess(configuration: cooperative)
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        let app = try await onThread { () throws -> ExampleApp in
            let client = try testClient(socket)
            let app = try self.suspendedApp(first, client)  // chat.message is a queue of bound 2
            _ = try client.call("io.coalesced.System.Deactivate")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try waitForApp(client, Self.mail, "state", "suspended")
            for number in 1...3 { #expect(try post(client, Self.mail, "chat.message", ["n": .int(Int64(number))]) == false) }
            return app
        }
        let second = try await onThread { try first.restartedWhenReady(configuration: cooperative) }
        let third = try await onThread { () throws -> DaemonProcess in
            let client = try testClient(socket)
            for number in 4...5 { #expect(try post(client, Self.mail, "chat.message", ["n": .int(Int64(number))]) == false) }
            return try second.restartedWhenReady(configuration: cooperative)
        }
        try await onThread {
            let client = try testClient(socket)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.mail)])["held"]?.arrayValue ?? []
            #expect(held.first { $0["kind"] == "chat.message" }?["count"] == 5)
            try waitForApp(client, Self.mail, "attached", true)
            _ = try client.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(
                try app.events(atLeast: 3) == [
                    #"event chat.message count=1 payload={"n":4}"#, #"event chat.message count=1 payload={"n":5}"#,
                    "event chat.message count=3 payload=- dropped=3",
                ]
            )
        }
        third.signal(SIGKILL)
    }

    /// How many events the daemon's database in `stateDirectory` keeps as sent and not acknowledged: what a kill -9
    /// now would leave. Read as any other reader of an SQLite database would (here Python's sqlite3), so that it
    /// sees only what was committed.
    static func deliveriesOnDisk(_ stateDirectory: String) throws -> Int {
        let script = """
            import sqlite3, sys
            database = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
            print(database.execute("SELECT count(*) FROM delivery").fetchone()[0])
            """
        let run = try runProcess("/usr/bin/python3", ["-c", script, stateDirectory + "/coalesced.db"])
        guard run.status == 0, let count = Int(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SupportError("cannot read the deliveries in \(stateDirectory): \(run.stderr)")
        }
        return count
    }

    /// The store's writer carries its name in the kernel, so that `top -H`, `ps -L` and perf tell it apart.
    @Test func theStoresWriterThreadCarriesItsName() async throws {
        let daemon = try DaemonProcess()
        let names = try await onThread {
            try daemon.waitUntilReady()
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/task")
            return tasks.compactMap { try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\($0)/comm", encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .newlines) }
        }
        #expect(names.contains("coalesced-store"), "the daemon's threads: \(names)")
        daemon.signal(SIGTERM)
        let status = try await onThread { daemon.waitForExit() }
        #expect(status == 0)
    }

    /// An acknowledgement does not cost a commit of its own: it goes to disk with the next write, or a tenth of a
    /// second later when there is none, and at the latest when the daemon stops. Either way the events it covers
    /// do not come again.
    @Test func acknowledgementsReachTheDiskWithoutAWriteOfTheirOwn() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        try await onThread {
            let (_, app) = try self.appThatAcknowledged(first, "mail.received", ["id": 1], #"event mail.received count=1 payload={"id":1}"#)
            // Nothing else is written meanwhile: the acknowledgement goes to disk alone, as its delay runs out.
            try waitUntil("the acknowledgement in the database, with no write after it") {
                try Self.deliveriesOnDisk(first.stateDirectory) == 0
            }
            first.signal(SIGKILL)
            _ = first.waitForExit()
            app.kill()
        }
        let second = try await onThread { try first.restartedWhenReady() }
        try await onThread {
            let client = try testClient(socket)
            let app = try self.relaunched(socket)
            #expect(try post(client, Self.mail, "mail.received", ["id": 2]) == true)
            #expect(
                try app.events(before: #"event mail.received count=1 payload={"id":2}"#).isEmpty,
                "an acknowledgement with no write after it was kept"
            )
            try waitForAcknowledged(client, Self.mail)
            second.signal(SIGTERM)  // at once
            #expect(second.waitForExit() == 0)
            app.kill()
        }
        let third = try await onThread { try second.restartedWhenReady() }
        try await onThread {
            let app = try self.relaunched(socket)
            #expect(try self.eventsBeforeAMarker(app, testClient(socket)).isEmpty, "an acknowledgement just before a stop was kept")
        }
        third.signal(SIGKILL)
    }

    @Test func netChangeComparesAgainstWhatTheAppReceivedBeforeARestart() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let socket = first.socketPath
        try await onThread {
            let (client, app) = try self.appThatAcknowledged(
                first, "temperature", ["celsius": 20], #"event temperature count=1 payload={"celsius":20}"#
            )
            // Acknowledged, and that on disk (a registration commits after it), so it is not delivered again.
            _ = try client.call("io.coalesced.App.Register", ["name": "org.example.later"])
            app.kill()
        }
        let second = try await onThread { try first.restartedWhenReady() }
        try await onThread {
            let client = try testClient(socket)
            for celsius in [25, 20] { _ = try post(client, Self.mail, "temperature", ["celsius": .int(Int64(celsius))]) }
            _ = try post(client, Self.mail, "mail.received", ["id": 1])
            let app = try self.relaunched(socket)
            #expect(try app.events(atLeast: 1) == [#"event mail.received count=1 payload={"id":1}"#])
            #expect(
                try self.eventsBeforeAMarker(app, client).count == 1,
                "the temperature came back to what the app last received: nothing: \(app.output)"
            )
        }
        second.signal(SIGKILL)
    }
}
