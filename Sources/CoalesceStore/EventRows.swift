public import CoalesceCore
import GRDB

/// One change to what the store keeps of an app's events: data, made by the app's inbox and written as it is.
public enum EventRow: Sendable {
    /// What the app holds of a kind (`slot`, JSON text), replacing what was; `position` orders a new kind's row.
    case hold(kind: String, position: Int, slot: String)
    /// Forget everything the app held: it was delivered.
    case clearHeld
    /// Keep an event (JSON text) until the app acknowledges it; the write answers with its number.
    case delivery(event: String)
    /// What the app last received of a netChange kind (JSON text).
    case baseline(kind: String, payload: String)
}

extension Store {
    /// Writes one app's event rows, after everything submitted before and in one savepoint: all of them or none.
    /// `finished` hears, once they are on disk, the numbers the store gave the deliveries, in order; or why the
    /// write failed, and then nothing of it is on disk.
    /// - Parameter together: queue it without starting a transaction for it, as ``submitTogether(_:)`` does.
    public func write(
        _ rows: [EventRow],
        of app: AppName,
        together: Bool,
        finished: @escaping @Sendable (Result<[Int64], StoreError>) -> Void
    ) {
        let write = EventRowsWrite(path: self.path, app: app, rows: rows, finished: finished)
        if together { self.submitTogether(write) } else { self.submit(write) }
    }
}

/// An app's event rows as one write.
final class EventRowsWrite: StoreOperation, @unchecked Sendable {
    private let path: String
    private let app: AppName
    private let rows: [EventRow]
    private let finished: @Sendable (Result<[Int64], StoreError>) -> Void
    // Written by perform, read by finish: both on the store's writer thread, one after the other.
    private var ids: [Int64] = []

    init(path: String, app: AppName, rows: [EventRow], finished: @escaping @Sendable (Result<[Int64], StoreError>) -> Void) {
        self.path = path
        self.app = app
        self.rows = rows
        self.finished = finished
    }

    // SQLite takes back a failed statement by itself: a write of one statement needs no savepoint.
    var runsOneStatement: Bool { self.rows.count <= 1 }

    func perform(_ transaction: StoreTransaction) throws {
        self.ids.removeAll()
        for row in self.rows {
            switch row {
            case .hold(let kind, let position, let slot):
                try transaction.run(
                    """
                    INSERT INTO held (app, kind, position, slot) VALUES (?, ?, ?, ?)
                    ON CONFLICT(app, kind) DO UPDATE SET slot = excluded.slot
                    """,
                    [self.app.value, kind, position, slot]
                )
            case .clearHeld:
                try transaction.run("DELETE FROM held WHERE app = ?", [self.app.value])
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
            }
        }
    }

    func finish(_ failure: (any Error)?) {
        guard let failure else { return self.finished(.success(self.ids)) }
        // Its statements fail as a StoreError; the savepoint around them fails as SQLite's error, sorted here.
        self.finished(.failure(StoreError(writing: self.path, failure)))
    }
}
