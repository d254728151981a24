public import CoalesceCore
import Foundation
import GRDB
import Synchronization
import Systemd

/// The daemon's durable state in one SQLite database (`coalesced.db` in the state directory, WAL mode): the app
/// registry and the state apps save. Writes that arrive together are committed in one transaction
/// (``GroupCommit``), and each is answered only after that transaction is on disk.
public final class Store: Sendable {
    public let path: String
    /// Read through; the writer's connections when they could be opened at start, read-only ones otherwise.
    private let pool: DatabasePool
    private let writer: StoreWriter
    let commits: GroupCommit
    private let lock: StoreLock
    private let record: StoreRecord
    /// What the record said when the store was opened.
    private let startMark: StoreRecord.Mark?
    private let owed: OwedWrites

    /// This start's generation of the daemon (1 for the first start): sequence numbers start past the previous
    /// start's, so that an acknowledgement an app's process sent the daemon before cannot count for this one's.
    /// It may not be on disk yet (``isWritable``): see ``writeWhatTheStartOwes()``.
    public let generation: Int64

    /// Opens (or creates) the store and brings its schema up to date.
    /// - Throws: ``StoreError`` naming the file when it is not a database this daemon can use; the daemon refuses
    ///   to start rather than begin empty.
    /// - Parameter finishing: runs the finishing of each committed batch's writes (its answers to their callers):
    ///   the daemon gathers a batch's answers there, so that each connection is woken once for them.
    public convenience init(
        stateDirectory: String,
        finishing: @escaping @Sendable (() -> Void) -> Void = { $0() }
    ) throws(StoreError) {
        try self.init(stateDirectory: stateDirectory, unhurriedDelay: GroupCommit.unhurriedDelay, finishing: finishing)
    }

    /// With how long an unhurried write may wait for company (tests lengthen it to see a hurry work alone).
    init(
        stateDirectory: String,
        unhurriedDelay: TimeInterval,
        finishing: @escaping @Sendable (() -> Void) -> Void = { $0() }
    ) throws(StoreError) {
        self.path = stateDirectory + "/coalesced.db"
        // One daemon per store, taken before any of the store's files is looked at.
        self.lock = try StoreLock(directory: stateDirectory)
        self.record = StoreRecord(directory: stateDirectory)
        let record = self.record
        let (existed, mark) = try Self.checkBeforeOpening(database: self.path, record: record)
        self.startMark = mark
        // A store that exists is served on a full disk, through read-only connections until there is room.
        var writable: DatabasePool?
        do {
            writable = try StoreWriter.open(self.path)
        } catch {
            guard case .diskFull = error, existed else { throw error }
        }
        self.writer = StoreWriter(path: self.path, pool: writable)
        let check: String?
        let generation: (number: Int64, written: Bool)
        var recordOwed = writable == nil
        do {
            if let writable {
                self.pool = writable
            } else {
                var readOnly = Configuration()
                readOnly.readonly = true
                do {
                    self.pool = try DatabasePool(path: self.path, configuration: readOnly)
                } catch {
                    throw StoreError.diskFull(path: self.path)  // it could not be opened for writing for that
                }
            }
            if existed, let writable {
                // A read opens (or creates) the log: from here on, the log of a daemon that dies is left behind.
                // Recorded before the first write, so that a log lost after it is noticed. On a full disk it is
                // owed: nothing is written until it is.
                _ = try writable.read { db in try Int.fetchOne(db, sql: "PRAGMA schema_version") }
                do {
                    try record.write(.open)
                } catch {
                    guard case .diskFull = error else { throw error }
                    recordOwed = true
                }
            }
            let migrated = existed ? try self.pool.read { db in try Self.migrator.hasCompletedMigrations(db) } : false
            if !migrated {
                // A migration writes the log, so the record comes first; neither can wait for room.
                guard let writable else { throw StoreError.diskFull(path: self.path) }
                if recordOwed { try record.write(.open) }
                recordOwed = false
                try Self.migrator.migrate(writable)
            }
            // A new store is recorded once its schema exists: an empty file left by a first start that died before
            // is not a store that was lost.
            if !existed { try record.write(.open) }
            check = try self.pool.read { db in try String.fetchOne(db, sql: "PRAGMA quick_check") }
            generation = try Self.startGeneration(writable, reading: self.pool)
        } catch let error as StoreError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            // Not damage: moving the store aside is not what to do.
            throw .diskFull(path: self.path)
        } catch {
            throw .cannotOpen(path: self.path, reason: "\(error)")
        }
        guard check == "ok" else { throw .damaged(path: self.path, what: "integrity check: \(check ?? "no answer")") }
        self.generation = generation.number
        self.owed = OwedWrites(
            path: self.path,
            record: self.record,
            recordOwed: recordOwed,
            generation: generation.written ? nil : generation.number
        )
        self.commits = GroupCommit(writer: self.writer, owed: self.owed, unhurriedDelay: unhurriedDelay, finishing: finishing)
    }

    /// Counts this start in the `meta` table and returns its number, or, when the disk is full, the number it is to
    /// have, not yet written.
    ///
    /// Why a start on a full disk takes the number without writing it: the number exists so that this start's
    /// sequence numbers exceed every earlier start's, and an app's process that outlived the last daemon may still
    /// acknowledge numbers it had from it. Past the last written start is right, unless this start hands numbers out
    /// and dies before writing: the next one would hand out the same ones. So no number reaches an app before it is
    /// written: every transaction writes it first (``OwedWrites``), and an app attaches only once one has
    /// committed (``writeWhatTheStartOwes()``). A number taken from a clock instead would let apps attach on a full
    /// disk, but every start would then have to count by that clock (a written count cannot be put after a number
    /// that was never written), and the wall clock can be set back while the boot-time clock starts again at 0.
    private static func startGeneration(
        _ writable: DatabasePool?,
        reading pool: DatabasePool
    ) throws -> (number: Int64, written: Bool) {
        do {
            guard let writable else { throw StoreError.diskFull(path: pool.path) }
            let number = try writable.write { db in
                try db.execute(sql: Self.countGeneration)
                return try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'generation'") ?? 1
            }
            return (number, true)
        } catch let error where StoreError(writing: pool.path, error) == .diskFull(path: pool.path) {
            let last = try pool.read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'generation'") }
            return ((last ?? 0) + 1, false)
        }
    }

    /// Counts a start (the first is 1).
    private static let countGeneration =
        "INSERT INTO meta (key, value) VALUES ('generation', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1"
    /// Sets the generation to the start's number, written late (``OwedWrites``); the lock keeps anyone else from
    /// counting meanwhile.
    static let setGeneration =
        "INSERT INTO meta (key, value) VALUES ('generation', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"

    /// Whether what the start writes is on disk and the last transaction did not find the disk full. A start on a
    /// full disk serves what the store holds; each write tries the disk again.
    public var isWritable: Bool {
        self.owed.isEmpty && !self.commits.lastFoundDiskFull
    }

    /// Whether the start has not yet written all it writes (the disk was full): ``writeWhatTheStartOwes()``.
    public var owesStartWrites: Bool {
        !self.owed.isEmpty
    }

    /// Writes what a start on a full disk could not (the record, the generation), if anything; returns once it is
    /// on disk.
    /// - Throws: ``StoreError`` (``StoreError/diskFull(path:)`` while there is no room).
    public func writeWhatTheStartOwes() async throws(StoreError) {
        guard !self.owed.isEmpty else { return }
        try await self.write { _ in }.wait()
    }

    /// What can be checked before SQLite opens the store, which would otherwise start on what it finds without a word:
    /// a database missing or emptied where the record says one was made; a log missing where the record says the
    /// daemon that last had the store open did not stop; a log whose damage would drop commits.
    /// - Returns: whether the database existed (it holds something), and what the record says.
    private static func checkBeforeOpening(
        database: String,
        record: StoreRecord
    ) throws(StoreError) -> (existed: Bool, mark: StoreRecord.Mark?) {
        let log = database + "-wal"
        let mark = try record.read()
        let existed = (Self.size(of: database) ?? 0) > 0
        if mark != nil, !existed { throw .missing(path: database, record: record.path) }
        if mark == .open, Self.size(of: log) == nil { throw .logMissing(path: log, record: record.path) }
        if let dropped = try WriteAheadLog.droppedCommits(path: log) {
            throw .logDamaged(path: log, what: dropped, database: database, record: record.path)
        }
        return (existed, mark)
    }

    /// The size of the file at `path`, or `nil` if there is none.
    private static func size(of path: String) -> Int? {
        (try? FileStatus(at: path))?.size  // whatever keeps it from being read, there is none to go by
    }

    /// Stops taking writes, waits for those taken, copies the log into the database and empties it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), and records that the store was closed: a clean stop leaves everything in
    /// `coalesced.db`. Writes submitted after this are refused.
    /// - Throws: ``StoreError`` when the checkpoint or the record fails; the log is then left as it is, and read at
    ///   the next start.
    public func close() async throws(StoreError) {
        let last = StatementWrite(path: self.path) { _ in }
        self.commits.shutDown(after: last)
        try? await last.commit.wait()  // a failed last write still ends the writes before it
        let result: Row?
        do {
            let pool: DatabasePool
            do {
                pool = try self.writer.get()
            } catch {
                // Never opened for writing, so nothing was written: a clean stop's record stays true.
                if self.owed.recordOwed, self.startMark == .closed { return }
                throw error
            }
            result = try pool.writeWithoutTransaction { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        } catch {
            throw StoreError(writing: self.path, error)
        }
        // One row: busy (1 when a reader or writer kept it from finishing), the log's frames, those copied.
        guard let result, result[0] as Int == 0 else {
            throw .cannotWrite(path: self.path + "-wal", reason: "the checkpoint at stop could not finish")
        }
        // A start that never wrote leaves the record of a clean stop as it found it (the disk may be full still).
        if self.owed.recordOwed, self.startMark == .closed { return }
        try self.record.write(.closed)
    }

    /// `PRAGMA synchronous` reads back 2 for FULL.
    static let synchronousFull = 2

    // MARK: Events

    /// A held kind as stored: its app, kind, position among the app's kinds and the slot, encoded by the daemon.
    public struct HeldRow: Sendable {
        public var app: String
        public var kind: String
        public var position: Int
        public var slot: String
    }

    /// An unacknowledged delivery as stored, numbered in the order deliveries were written.
    public struct DeliveryRow: Sendable {
        public var app: String
        public var id: Int64
        public var event: String
    }

    /// An entry of a queue kind as stored: its serial among the kind's posts, when it was posted, and its payload.
    public struct QueuedRow: Sendable {
        public var app: String
        public var kind: String
        public var serial: Int
        public var posted: Double
        public var payload: String
    }

    /// What an app last received of a netChange kind.
    public struct BaselineRow: Sendable {
        public var app: String
        public var kind: String
        public var payload: String
    }

    // What apps hold and were sent is read row by row, each handed on as it is read: a store filled to its quotas is
    // then never in memory twice, as the rows' text and as what the daemon makes of it.

    /// Each held kind, each app's in the order of its kinds' first posts.
    public func eachHeldRow(_ body: (HeldRow) throws(StoreError) -> Void) throws(StoreError) {
        try self.each("SELECT app, kind, position, slot FROM held ORDER BY app, position") { row throws(StoreError) in
            try body(HeldRow(app: row["app"], kind: row["kind"], position: row["position"], slot: row["slot"]))
        }
    }

    /// Each entry of the apps' queue kinds, oldest first (the order of the table's key, which needs no sort).
    public func eachQueuedRow(_ body: (QueuedRow) throws(StoreError) -> Void) throws(StoreError) {
        try self.each("SELECT app, kind, serial, posted, payload FROM queued ORDER BY app, kind, serial") { row throws(StoreError) in
            try body(QueuedRow(app: row["app"], kind: row["kind"], serial: row["serial"], posted: row["posted"], payload: row["payload"]))
        }
    }

    /// Each delivery not acknowledged, in the order they were written (each app's in its order), which needs no sort.
    public func eachDeliveryRow(_ body: (DeliveryRow) throws(StoreError) -> Void) throws(StoreError) {
        try self.each("SELECT app, id, event FROM delivery ORDER BY id") { row throws(StoreError) in
            try body(DeliveryRow(app: row["app"], id: row["id"], event: row["event"]))
        }
    }

    public func heldRows() throws(StoreError) -> [HeldRow] {
        var rows: [HeldRow] = []
        try self.eachHeldRow { rows.append($0) }
        return rows
    }

    public func queuedRows() throws(StoreError) -> [QueuedRow] {
        var rows: [QueuedRow] = []
        try self.eachQueuedRow { rows.append($0) }
        return rows
    }

    public func deliveryRows() throws(StoreError) -> [DeliveryRow] {
        var rows: [DeliveryRow] = []
        try self.eachDeliveryRow { rows.append($0) }
        return rows
    }

    /// Runs `body` on each row `sql` reads, as it reads it; an error `body` throws ends the read and is thrown as it is.
    private func each(_ sql: String, _ body: (Row) throws(StoreError) -> Void) throws(StoreError) {
        try self.read { db in
            let rows = try Row.fetchCursor(db, sql: sql)
            while let row = try rows.next() { try body(row) }
        }
    }

    public func baselineRows() throws(StoreError) -> [BaselineRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, kind, payload FROM baseline").map {
                BaselineRow(app: $0["app"], kind: $0["kind"], payload: $0["payload"])
            }
        }
    }

    /// Queues `operation` for the next transaction; it returns at once, and the operation hears of the commit.
    public func submit(_ operation: any StoreOperation) {
        self.commits.submit(operation)
    }

    /// Queues `operation` without starting a transaction for it: the caller calls ``hurry()`` once it has queued
    /// what belongs together (the posts of one read, say), so that they share one transaction and one fsync
    /// rather than the first going alone. If that call never comes, it goes within a tenth of a second anyway.
    public func submitTogether(_ operation: any StoreOperation) {
        self.commits.submit(operation, unhurried: true)
    }

    /// Starts a transaction for everything queued.
    public func hurry() {
        self.commits.hurry()
    }

    /// The app acknowledged the deliveries numbered `ids`. Not waited for, and unhurried (it goes with the next
    /// write, or within a tenth of a second): an acknowledgement lost in a crash only means those events come again.
    public func acknowledge(app: AppName, ids: [Int64]) -> StoreCommit {
        self.write(unhurried: true) { transaction in
            for id in ids { try transaction.run("DELETE FROM delivery WHERE id = ?", [id]) }
        }
    }

    /// Returns once everything submitted before is on disk (or failed): unhurried writes included.
    public func flush() async {
        try? await self.write { _ in }.wait()
    }

    func write(unhurried: Bool = false, _ body: @escaping @Sendable (StoreTransaction) throws -> Void) -> StoreCommit {
        let write = StatementWrite(path: self.path, body)
        self.commits.submit(write, unhurried: unhurried)
        return write.commit
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try self.pool.read(body)
        } catch let error as StoreError {
            throw error  // the caller's, from a row it was handed
        } catch {
            throw .cannotRead(path: self.path, reason: "\(error)")
        }
    }
}

/// An app's state written to its row: nobody waits for it, and a failure leaves the state recorded before, which the
/// next write replaces.
final class StateWrite: StoreOperation {
    let app: AppName
    let state: Store.RecordedState

    init(app: AppName, state: Store.RecordedState) {
        self.app = app
        self.state = state
    }

    var runsOneStatement: Bool { true }
    var row: StoreRow? { .app(self.app) }
    func perform(_ transaction: StoreTransaction) throws {}
    func finish(_ failure: (any Error)?) {}

    func writeRow(_ transaction: StoreTransaction) throws {
        try transaction.run(
            "UPDATE app SET state = ?, interrupted = ?, pid = ?, process = ? WHERE name = ?",
            [self.state.state.rawValue, self.state.interrupted, self.state.pid.map { Int64($0) }, self.state.process, self.app.value]
        )
    }
}
