import CoalesceTestSupport
import Foundation
import Synchronization
import Testing
import Varlink

// Events across real restarts of the binary: held and unacknowledged events kept on disk through kill -9, and what
// reaches the disk. The other restarts run in process, in `InProcessEventRestartTests`.
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
}
