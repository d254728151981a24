import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The store is the daemon's alone, and a store that is not what the daemon left is refused, not started on with
/// data missing: two daemons on one state directory; a clean stop; a database emptied or deleted; a log deleted or
/// damaged.
@Suite struct StoreGuardTests {
    static let app = "org.test.guard"

    /// Registers ``app`` (it never runs, so it holds what is posted) and posts `count` ticks, each answered (on disk).
    func postTicks(_ socket: String, _ count: Int, register: Bool = true) throws {
        let client = try testClient(socket)
        if register {
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app), "kinds": ["tick": ["policy": "count"]]])
        }
        for _ in 0..<count { try post(client, Self.app, "tick") }
    }

    /// How many ticks the app holds, as the daemon on `socket` says.
    func heldTicks(_ socket: String) throws -> Int64? {
        let held = try testClient(socket).call("io.coalesced.System.GetQueue", ["app": .string(Self.app)])["held"]
        return held?.arrayValue?.first { $0["kind"] == "tick" }?["count"]?.intValue
    }

    /// The size of a file, or `nil` when there is none.
    func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
    }

    /// The lines of the daemon's output that hold `text`.
    func lines(_ daemon: DaemonProcess, holding text: String) -> [Substring] {
        daemon.output.split(separator: "\n").filter { $0.contains(text) }
    }

    @Test func aSecondDaemonOnTheSameStateDirectoryIsRefusedAndTheFirstServesOn() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        try await onThread { try self.postTicks(first.socketPath, 5) }
        // Its own socket, the first one's state directory.
        let second = try DaemonProcess(arguments: ["--state-dir", first.stateDirectory])
        let status = try await onThread { second.waitForExit() }
        #expect(status == 1, "refused, so that systemd sees the failure: \(second.output)")
        let refusal = self.lines(second, holding: "\(first.stateDirectory) is in use by another coalesced (pid \(first.pid))")
        #expect(refusal.count == 1, "one line naming the directory and the other daemon: \(second.output)")
        #expect(!FileManager.default.fileExists(atPath: second.socketPath), "the refused daemon bound no socket")
        try await onThread {
            try self.postTicks(first.socketPath, 5, register: false)
            #expect(try self.heldTicks(first.socketPath) == 10, "the first daemon serves on")
        }
        first.signal(SIGTERM)
        #expect(try await onThread { first.waitForExit() } == 0)
        // Once the first has stopped, a daemon starts on the directory and finds everything the first answered.
        let third = try DaemonProcess(arguments: ["--state-dir", first.stateDirectory])
        try await onThread { try third.waitUntilReady() }
        #expect(try await onThread { try self.heldTicks(third.socketPath) } == 10)
        third.signal(SIGKILL)
    }

    @Test func aCleanStopLeavesEverythingInTheDatabase() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        try await onThread { try self.postTicks(first.socketPath, 20) }
        let log = first.stateDirectory + "/coalesced.db-wal"
        #expect((self.size(log) ?? 0) > 0, "the log holds the commits while the daemon runs")
        first.signal(SIGTERM)
        #expect(try await onThread { first.waitForExit() } == 0)
        #expect((self.size(log) ?? 0) == 0, "the log was copied into the database and emptied")
        let record = try String(contentsOfFile: first.stateDirectory + "/coalesced.db.state", encoding: .utf8)
        #expect(record == "closed\n")
        // The database alone holds it all.
        unlink(log)
        unlink(first.stateDirectory + "/coalesced.db-shm")
        let second = try await onThread { try first.restartedWhenReady() }
        #expect(try await onThread { try self.heldTicks(second.socketPath) } == 20)
        second.signal(SIGKILL)
    }

    /// SQLite deletes the log only when the last connection closes; the daemon keeps writing to the one it has open.
    /// A stop copies that into the database, so nothing answered is lost; after a crash it is gone, and the next
    /// start refuses, naming the log.
    @Test func aLogDeletedWhileTheDaemonRunsIsCopiedAtStopAndRefusedAfterACrash() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let log = first.stateDirectory + "/coalesced.db-wal"
        try await onThread { try self.postTicks(first.socketPath, 10) }
        #expect(unlink(log) == 0)
        try await onThread { try self.postTicks(first.socketPath, 10, register: false) }
        first.signal(SIGTERM)
        #expect(try await onThread { first.waitForExit() } == 0)
        let second = try await onThread { try first.restartedWhenReady() }
        #expect(try await onThread { try self.heldTicks(second.socketPath) } == 20, "the stop kept every answered post")

        try await onThread { try self.postTicks(second.socketPath, 10, register: false) }
        #expect(unlink(log) == 0)
        try await onThread { try self.postTicks(second.socketPath, 10, register: false) }
        let third = try await onThread { try second.restarted() }  // SIGKILL: the deleted log goes with the process
        #expect(try await onThread { third.waitForExit() } == 1, "\(third.output)")
        #expect(self.lines(third, holding: "\(log) is missing").count == 1, "\(third.output)")
    }

    @Test func anEmptiedOrDeletedDatabaseIsRefused() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        try await onThread { try self.postTicks(first.socketPath, 3) }
        first.signal(SIGTERM)
        #expect(try await onThread { first.waitForExit() } == 0)
        let database = first.stateDirectory + "/coalesced.db"
        #expect(truncate(database, 0) == 0)
        let second = try await onThread { try first.restarted() }
        #expect(try await onThread { second.waitForExit() } == 1, "\(second.output)")
        #expect(self.lines(second, holding: "\(database) is missing or empty").count == 1, "\(second.output)")
        #expect(self.size(database) == 0, "left as it was")

        #expect(unlink(database) == 0)
        let third = try await onThread { try second.restarted() }
        #expect(try await onThread { third.waitForExit() } == 1, "\(third.output)")
        #expect(self.lines(third, holding: "\(database) is missing or empty").count == 1, "\(third.output)")
        #expect(!FileManager.default.fileExists(atPath: database), "no empty store was made in its place")
    }

    /// 4 KiB of random bytes in the middle of the log: SQLite would read the log up to the damage and drop every
    /// commit after it.
    @Test func aDamagedLogIsRefused() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        // Each post a commit of its own; fewer than SQLite's 1,000 pages before it checkpoints, so that the whole
        // log is this run's.
        try await onThread { try self.postTicks(first.socketPath, 200) }
        let log = first.stateDirectory + "/coalesced.db-wal"
        let size = try #require(self.size(log))
        first.signal(SIGKILL)
        _ = try await onThread { first.waitForExit() }
        #expect(size > 100 * 4096, "the log holds the posts: \(size) bytes")
        var random = SystemRandomNumberGenerator()
        let noise = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) }
        let descriptor = open(log, O_WRONLY)
        #expect(noise.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(size / 2)) } == 4096)
        close(descriptor)
        let second = try await onThread { try first.restarted() }
        #expect(try await onThread { second.waitForExit() } == 1, "\(second.output)")
        #expect(self.lines(second, holding: "\(log) is damaged (frame ").count == 1, "\(second.output)")
    }
}
