import GRDB

/// What the store keeps of journal watches: the ones added at run time, and how far each has read.
extension Store {
    static let journalPositionSQL = """
        INSERT INTO journal_position (watch, app, cursor) VALUES (?, ?, ?)
        ON CONFLICT(watch, app) DO UPDATE SET cursor = excluded.cursor
        """

    /// A watch added at run time: its definition as the System interface took it (JSON), and who added it.
    public struct WatchRow: Sendable, Hashable {
        public var name: String
        public var definition: String
        public var owner: UInt32

        public init(name: String, definition: String, owner: UInt32) {
            self.name = name
            self.definition = definition
            self.owner = owner
        }
    }

    public func watchRows() throws(StoreError) -> [WatchRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT name, definition, owner FROM journal_watch ORDER BY name").map {
                WatchRow(name: $0["name"], definition: $0["definition"], owner: $0["owner"])
            }
        }
    }

    /// Keeps a watch added at run time, with where it begins: its position under app '' (`cursor`), when known.
    public func addWatch(_ row: WatchRow, from cursor: String?) async throws(StoreError) {
        try await self.write { transaction in
            try transaction.run(
                "INSERT INTO journal_watch (name, definition, owner) VALUES (?, ?, ?)", [row.name, row.definition, row.owner]
            )
            try transaction.run("DELETE FROM journal_position WHERE watch = ?", [row.name])
            if let cursor { try transaction.run(Self.journalPositionSQL, [row.name, "", cursor]) }
        }.wait()
    }

    /// Forgets a watch added at run time, and the positions of any watch of that name.
    public func removeWatch(_ name: String) async throws(StoreError) {
        try await self.write { transaction in
            try transaction.run("DELETE FROM journal_watch WHERE name = ?", [name])
            try transaction.run("DELETE FROM journal_position WHERE watch = ?", [name])
        }.wait()
    }

    /// Forgets the positions of watches no longer configured (a watch of the same name later starts afresh).
    public func forgetPositions(except names: Set<String>) {
        let kept = Array(names)
        _ = self.write(unhurried: true) { transaction in
            let placeholders = kept.isEmpty ? "''" : Array(repeating: "?", count: kept.count).joined(separator: ",")
            try transaction.run(
                "DELETE FROM journal_position WHERE watch NOT IN (\(placeholders))", StatementArguments(kept.map { $0 as any DatabaseValueConvertible })
            )
        }
    }

    /// Every stored position: by watch, by app ('' for the watch's own).
    public func journalPositions() throws(StoreError) -> [String: [String: String]] {
        try self.read { db in
            var positions: [String: [String: String]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT watch, app, cursor FROM journal_position") {
                positions[row["watch"], default: [:]][row["app"]] = row["cursor"]
            }
            return positions
        }
    }

    /// Sets a watch's position: its own (`app` ''; every entry it matched up to `cursor` is posted), or an app's
    /// for a post that went into no write (a volatile kind's). Unhurried, as losing it in a crash only means
    /// reading again from the one before.
    public func setJournalPosition(watch: String, app: String = "", cursor: String) {
        _ = self.write(unhurried: true) { transaction in
            try transaction.run(Self.journalPositionSQL, [watch, app, cursor])
        }
    }
}
