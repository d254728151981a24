import CoalesceCore
@testable import CoalesceStore
import CoalesceTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

/// The group commit's handling of writes that set the same row again and again (an app's recorded state): within
/// one batch the row is written once, by the last of them, before any other sort of write and at the end; a failed
/// row write fails every write that led to it. Real SQLite, in a temporary state directory (the tests set held
/// rows, whose table has the shape such a row needs).
@Suite struct StoreBatchTests {
    /// What the operations did, in order, on the store's writer thread.
    final class Journal: Sendable {
        private let lines = Mutex<[String]>([])
        private let finished = DispatchSemaphore(value: 0)
        func add(_ line: String) { self.lines.withLock { $0.append(line) } }
        var all: [String] { self.lines.withLock { $0 } }
        func finish() { self.finished.signal() }
        func waitForFinishes(_ count: Int) {
            for finished in 0..<count where self.finished.wait(timeout: .now() + 10) == .timedOut {
                Issue.record("only \(finished) of \(count) operations finished within 10 s")
                return
            }
        }
    }

    struct RowFailed: Error {}

    /// Sets held row (app, kind) to `value`; its row write fails when `failing`.
    final class SetRow: StoreOperation {
        let app: AppName
        let kind: String
        let value: String
        let failing: Bool
        let journal: Journal

        init(_ app: AppName, _ kind: String, _ value: String, failing: Bool = false, _ journal: Journal) {
            self.app = app
            self.kind = kind
            self.value = value
            self.failing = failing
            self.journal = journal
        }

        var row: StoreRow? { StoreRow(app: self.app, kind: self.kind) }
        func perform(_ transaction: StoreTransaction) throws { self.journal.add("set \(self.value)") }
        func writeRow(_ transaction: StoreTransaction) throws {
            self.journal.add("write \(self.value)")
            if self.failing { throw RowFailed() }
            try transaction.run(
                "INSERT INTO held (app, kind, position, slot) VALUES (?, ?, 0, ?) ON CONFLICT(app, kind) DO UPDATE SET slot = excluded.slot",
                [self.app.value, self.kind, self.value]
            )
        }
        func finish(_ failure: (any Error)?) {
            self.journal.add("\(failure == nil ? "kept" : "failed") \(self.value)")
            self.journal.finish()
        }
    }

    /// Clears what an app holds (as a wake does); with `gate`, waits for it first, so that what is submitted
    /// meanwhile makes up the next batch.
    final class ClearApp: StoreOperation {
        let app: AppName
        let journal: Journal
        let gate: DispatchSemaphore?
        /// Signalled once the writer has taken this write, and so nothing submitted after it into its batch.
        let entered = DispatchSemaphore(value: 0)

        init(_ app: AppName, _ journal: Journal, gate: DispatchSemaphore? = nil) {
            self.app = app
            self.journal = journal
            self.gate = gate
        }

        func perform(_ transaction: StoreTransaction) throws {
            self.entered.signal()
            self.gate?.wait()
            self.journal.add("clear \(self.app)")
            try transaction.run("DELETE FROM held WHERE app = ?", [self.app.value])
        }
        func finish(_ failure: (any Error)?) { self.journal.finish() }
    }

    /// Reads how the connection the writes run on syncs its commits, from inside a write's transaction.
    final class ReadSynchronous: StoreOperation {
        let value = Mutex<Int?>(nil)
        let journal: Journal

        init(_ journal: Journal) { self.journal = journal }

        func perform(_ transaction: StoreTransaction) throws {
            let synchronous = try Int.fetchOne(transaction.db, sql: "PRAGMA synchronous")
            self.value.withLock { $0 = synchronous }
        }
        func finish(_ failure: (any Error)?) { self.journal.finish() }
    }

    /// An answered write must survive a power cut, not only the daemon's crash: the WAL is synced at every
    /// commit (FULL, 2). GRDB's pool sets NORMAL (synced only at checkpoints) when it turns WAL on, which
    /// silently overrode a FULL set as each connection opened.
    @Test func everyCommitIsSyncedToDisk() async throws {
        try await self.withStore { store in
            let journal = Journal()
            let read = ReadSynchronous(journal)
            store.submit(read)
            journal.waitForFinishes(1)
            #expect(read.value.withLock { $0 } == Store.synchronousFull)
        }
    }

    /// A store in a temporary directory, with the apps the tests write for registered (held rows belong to an app).
    /// `body` waits for the store's writer thread (semaphores, up to 10 s each): it runs on a thread of its own, not
    /// on one of the concurrency pool's few, which the in-process tests running beside it need.
    private func withStore(
        unhurriedDelay: TimeInterval = GroupCommit.unhurriedDelay,
        _ body: @escaping @Sendable (Store) throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }  // the store's files are in it until the end
        let store = try await onThread { try Store(stateDirectory: directory.path, unhurriedDelay: unhurriedDelay) }
        for name in ["org.example.gate", "org.example.mail"] {
            try await store.save(AppRegistration(name: try AppName(name), owner: 0))
        }
        try await onThread { try body(store) }
    }

    /// Submits `operations` so that they all go into one batch: behind a write that waits until they are queued.
    private func submitAsOneBatch(_ store: Store, _ journal: Journal, _ operations: [any StoreOperation]) {
        let gate = DispatchSemaphore(value: 0)
        let holding = ClearApp(try! AppName("org.example.gate"), journal, gate: gate)
        store.submit(holding)
        holding.entered.wait()
        for operation in operations { store.submit(operation) }
        gate.signal()
        journal.waitForFinishes(operations.count + 1)
    }

    @Test func aRowSetManyTimesInABatchIsWrittenOnceWithTheLastValue() async throws {
        try await self.withStore { store in
            let journal = Journal()
            let mail = try AppName("org.example.mail")
            self.submitAsOneBatch(store, journal, (1...5).map { SetRow(mail, "inbox", "v\($0)", journal) })
            #expect(journal.all.filter { $0.hasPrefix("write") } == ["write v5"])
            #expect(journal.all.filter { $0.hasPrefix("kept") } == ["kept v1", "kept v2", "kept v3", "kept v4", "kept v5"])
            let rows = try store.heldRows()
            #expect(rows.map { "\($0.app) \($0.kind) \($0.slot)" } == ["org.example.mail inbox v5"])
        }
    }

    /// Writes submitted together (the posts of one read) share a batch; a hurry that never comes costs them a
    /// tenth of a second, not their place on disk.
    @Test func writesSubmittedTogetherShareABatchAndNeverWaitForever() async throws {
        try await self.withStore { store in
            let journal = Journal()
            let mail = try AppName("org.example.mail")
            for value in ["t1", "t2", "t3"] { store.submitTogether(SetRow(mail, "inbox", value, journal)) }
            journal.waitForFinishes(3)
            #expect(journal.all.filter { $0.hasPrefix("write") } == ["write t3"], "one batch, without a hurry")
            #expect(journal.all.filter { $0.hasPrefix("kept") }.count == 3)
            #expect(try store.heldRows().map { "\($0.kind) \($0.slot)" } == ["inbox t3"])
        }
    }

    /// A hurry starts the transaction for what was submitted together, without waiting for the delay (an hour
    /// here, so that only the hurry can have written them).
    @Test func aHurryStartsTheTransactionAtOnce() async throws {
        try await self.withStore(unhurriedDelay: 3600) { store in
            let journal = Journal()
            let mail = try AppName("org.example.mail")
            for value in ["u1", "u2"] { store.submitTogether(SetRow(mail, "inbox", value, journal)) }
            store.hurry()
            journal.waitForFinishes(2)
            #expect(journal.all.filter { $0.hasPrefix("write") } == ["write u2"])
            #expect(journal.all.filter { $0.hasPrefix("kept") } == ["kept u1", "kept u2"])
        }
    }

    @Test func aFailedRowWriteFailsEveryWriteOfThatRow() async throws {
        try await self.withStore { store in
            let journal = Journal()
            let mail = try AppName("org.example.mail")
            self.submitAsOneBatch(
                store, journal,
                [
                    SetRow(mail, "inbox", "a1", journal), SetRow(mail, "sent", "b1", journal),
                    SetRow(mail, "inbox", "a2", journal), SetRow(mail, "inbox", "a3", failing: true, journal),
                ]
            )
            let lines = journal.all
            #expect(lines.contains("failed a1") && lines.contains("failed a2") && lines.contains("failed a3"))
            #expect(lines.contains("kept b1"))
            #expect(try store.heldRows().map { "\($0.kind) \($0.slot)" } == ["sent b1"])
        }
    }

    @Test func anotherSortOfWriteSeesTheRowsWrittenBeforeIt() async throws {
        try await self.withStore { store in
            let journal = Journal()
            let mail = try AppName("org.example.mail")
            // Set, then cleared (a wake), then set again: only what came after the clear is held.
            self.submitAsOneBatch(
                store, journal,
                [
                    SetRow(mail, "inbox", "before", journal), SetRow(mail, "sent", "before", journal),
                    ClearApp(mail, journal), SetRow(mail, "inbox", "after", journal),
                ]
            )
            let lines = journal.all
            let clear = try #require(lines.firstIndex(of: "clear org.example.mail"))
            #expect(lines[..<clear].filter { $0.hasPrefix("write") }.count == 2)
            #expect(try store.heldRows().map { "\($0.kind) \($0.slot)" } == ["inbox after"])
        }
    }
}
