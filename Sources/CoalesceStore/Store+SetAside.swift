import GRDB

/// Rows the daemon cannot read back, put aside rather than refusing to open the store: one app's held data moves
/// whole to the `setAside` table, where it stays, untouched, for an operator to look at.
extension Store {
    /// What is set aside for one app.
    public struct SetAsideSummary: Sendable, Hashable {
        public var app: String
        /// Rows set aside, over every start that set some aside.
        public var rows: Int
        /// When the last of them were set aside (seconds since the epoch).
        public var at: Double
        /// Why, as the last start that set rows aside said it.
        public var reason: String

        public init(app: String, rows: Int, at: Double, reason: String) {
            self.app = app
            self.rows = rows
            self.at = at
            self.reason = reason
        }
    }

    /// The tables that hold an app's events, and how each row is kept in `setAside`: every column, as a JSON object.
    private static let heldTables: [(table: String, columns: String)] = [
        ("held", "json_object('kind', kind, 'position', position, 'slot', slot)"),
        ("queued", "json_object('kind', kind, 'serial', serial, 'posted', posted, 'payload', payload)"),
        ("delivery", "json_object('id', id, 'event', event)"),
        ("baseline", "json_object('kind', kind, 'payload', payload)"),
    ]

    /// Moves every row of `app`'s held data (held kinds, queue entries, unacknowledged deliveries, netChange
    /// baselines) to `setAside`, with `reason`, in one transaction. With `declarations`, the app's declarations are
    /// set aside too and replaced by none.
    public func setAside(app: String, reason: String, at: Double, declarations: Bool) -> StoreCommit {
        self.write { transaction in
            for (table, columns) in Self.heldTables {
                try transaction.run(
                    "INSERT INTO setAside (app, at, reason, source, row) SELECT app, ?, ?, '\(table)', \(columns) FROM \(table) WHERE app = ?",
                    [at, reason, app]
                )
                try transaction.run("DELETE FROM \(table) WHERE app = ?", [app])
            }
            if declarations {
                try transaction.run(
                    "INSERT INTO setAside (app, at, reason, source, row) SELECT name, ?, ?, 'app', json_object('declarations', declarations) FROM app WHERE name = ?",
                    [at, reason, app]
                )
                try transaction.run("UPDATE app SET declarations = '{}' WHERE name = ?", [app])
            }
        }
    }

    /// What is set aside, per app.
    public func setAsideSummaries() throws(StoreError) -> [SetAsideSummary] {
        try self.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT app, count(*) AS rows, max(at) AS at,
                        (SELECT reason FROM setAside AS last WHERE last.app = setAside.app ORDER BY at DESC, id DESC LIMIT 1) AS reason
                    FROM setAside GROUP BY app ORDER BY app
                    """
            ).map { SetAsideSummary(app: $0["app"], rows: $0["rows"], at: $0["at"], reason: $0["reason"]) }
        }
    }

    /// One row set aside: the table it was in, and its columns as a JSON object.
    public struct SetAsideRow: Sendable, Hashable {
        public var app: String
        public var at: Double
        public var reason: String
        public var source: String
        public var row: String
    }

    /// Every row set aside, in the order they were.
    public func setAsideRows() throws(StoreError) -> [SetAsideRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, at, reason, source, row FROM setAside ORDER BY id").map {
                SetAsideRow(app: $0["app"], at: $0["at"], reason: $0["reason"], source: $0["source"], row: $0["row"])
            }
        }
    }
}
