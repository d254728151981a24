public import CoalesceCore
import GRDB
import Synchronization

/// One change to what the store keeps of an app's events: data, made by the app's inbox and written as it is.
public enum EventRow: Sendable {
    /// What the app holds of a kind (`slot`, JSON text), replacing what was; `position` orders a new kind's row.
    case hold(kind: String, position: Int, slot: String)
    /// One more entry of a queue kind (`payload`, JSON text), numbered `serial` among the kind's posts.
    case enqueue(kind: String, serial: Int, posted: Double, payload: String)
    /// Forget a queue kind's entries numbered before `serial`: the oldest, dropped past the kind's bound.
    case dropQueued(kind: String, before: Int)
    /// Forget everything the app held, queue entries included: it was delivered.
    case clearHeld
    /// Keep an event (JSON text) until the app acknowledges it; the write answers with its number.
    case delivery(event: String)
    /// What the app last received of a netChange kind (JSON text).
    case baseline(kind: String, payload: String)
    /// A journal watch has posted to the app every entry it matched up to `cursor`: written with the posts.
    case journalPosition(watch: String, cursor: String)
}

extension Store {
    /// Writes one app's event rows, after everything submitted before and in one savepoint: all of them or none.
    /// `finished` hears, once they are on disk, the numbers the store gave the deliveries, in order; or why the
    /// write failed, and then nothing of it is on disk. Until the store begins the write, its rows can be replaced
    /// through the handle it returns.
    /// - Parameter together: queue it without starting a transaction for it, as ``submitTogether(_:)`` does.
    @discardableResult
    public func write(
        _ rows: [EventRow],
        of app: AppName,
        together: Bool,
        finished: @escaping @Sendable (Result<[Int64], StoreError>) -> Void
    ) -> EventWrite {
        let write = self.eventWrite(rows, of: app, finished: finished)
        if together { self.submitTogether(write) } else { self.submit(write) }
        return write
    }

    /// One app's event rows as a write that is not submitted yet: a caller that decides under a lock makes it there
    /// (so that what it decides next can replace its rows) and submits it once the lock is let go.
    public func eventWrite(
        _ rows: [EventRow],
        of app: AppName,
        finished: @escaping @Sendable (Result<[Int64], StoreError>) -> Void
    ) -> EventWrite {
        EventWrite(path: self.path, app: app, rows: rows, finished: finished)
    }
}

/// An app's event rows as one write of the store's.
public final class EventWrite: StoreOperation, @unchecked Sendable {
    private struct Pending {
        var rows: [EventRow]
        /// The store has begun the write: its rows are final.
        var begun = false
    }

    private let path: String
    private let app: AppName
    private let pending: Mutex<Pending>
    private let finished: @Sendable (Result<[Int64], StoreError>) -> Void
    // Written by perform, read by finish: both on the store's writer thread, one after the other.
    private var ids: [Int64] = []
    private var statements = 0

    init(path: String, app: AppName, rows: [EventRow], finished: @escaping @Sendable (Result<[Int64], StoreError>) -> Void) {
        self.path = path
        self.app = app
        self.pending = Mutex(Pending(rows: rows))
        self.finished = finished
    }

    /// Changes the write's rows, unless the store has taken it: its first `kept` rows stay, and `added` take the
    /// place of the rest. Returns whether it did. The write keeps its place in the order of the store's writes.
    public func replace(keepingFirst kept: Int, with added: [EventRow]) -> Bool {
        self.pending.withLock { pending in
            guard !pending.begun, kept <= pending.rows.count else { return false }
            pending.rows.removeSubrange(kept...)
            pending.rows.append(contentsOf: added)
            return true
        }
    }

    public func begin() {
        self.pending.withLock { $0.begun = true }
    }

    // SQLite takes back a failed statement by itself: a write of one statement needs no savepoint.
    public var runsOneStatement: Bool { self.pending.withLock { $0.rows.count <= 1 } }

    public func perform(_ transaction: StoreTransaction) throws {
        let rows = self.pending.withLock { $0.rows }  // final: the store has begun the write
        self.ids.removeAll()
        for row in rows {
            switch row {
            case .hold(let kind, let position, let slot):
                try transaction.run(
                    """
                    INSERT INTO held (app, kind, position, slot) VALUES (?, ?, ?, ?)
                    ON CONFLICT(app, kind) DO UPDATE SET slot = excluded.slot
                    """,
                    [self.app.value, kind, position, slot]
                )
            case .enqueue(let kind, let serial, let posted, let payload):
                try transaction.run(
                    "INSERT INTO queued (app, kind, serial, posted, payload) VALUES (?, ?, ?, ?, ?)",
                    [self.app.value, kind, serial, posted, payload]
                )
            case .dropQueued(let kind, let before):
                try transaction.run("DELETE FROM queued WHERE app = ? AND kind = ? AND serial < ?", [self.app.value, kind, before])
            case .clearHeld:
                try transaction.run("DELETE FROM held WHERE app = ?", [self.app.value])
                try transaction.run("DELETE FROM queued WHERE app = ?", [self.app.value])
            case .delivery(let event):
                try transaction.run("INSERT INTO delivery (app, event) VALUES (?, ?)", [self.app.value, event])
                self.ids.append(transaction.db.lastInsertedRowID)
            case .baseline(let kind, let payload):
                try transaction.run(
                    """
                    INSERT INTO baseline (app, kind, payload) VALUES (?, ?, ?)
                    ON CONFLICT(app, kind) DO UPDATE SET payload = excluded.payload
                    """,
                    [self.app.value, kind, payload]
                )
            case .journalPosition(let watch, let cursor):
                try transaction.run(Store.journalPositionSQL, [watch, self.app.value, cursor])
            }
        }
    }

    public func finish(_ failure: (any Error)?) {
        guard let failure else { return self.finished(.success(self.ids)) }
        // Its statements fail as a StoreError; the savepoint around them fails as SQLite's error, sorted here.
        self.finished(.failure(StoreError(writing: self.path, failure)))
    }
}
