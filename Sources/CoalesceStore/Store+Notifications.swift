import GRDB

/// What the store keeps of local notifications: each pending request as its record (the daemon's JSON), each app's
/// delivered list, and each app's badge and the counters of its list. The daemon reads it all at start and writes
/// each change in one transaction before it answers or presents.
extension Store {
    static func createNotificationTables(_ db: Database) throws {
        try db.create(table: "alertRequest") { table in
            table.column("app", .text).notNull().references("app", onDelete: .cascade)
            table.column("id", .text).notNull()
            table.column("record", .text).notNull()
            table.primaryKey(["app", "id"])
        }
        try db.create(table: "alertDelivered") { table in
            table.column("app", .text).notNull().references("app", onDelete: .cascade)
            table.column("serial", .integer).notNull()
            table.column("entry", .text).notNull()
            table.primaryKey(["app", "serial"])
        }
        try db.create(table: "alertApp") { table in
            table.column("app", .text).notNull().primaryKey().references("app", onDelete: .cascade)
            table.column("badge", .integer)
            table.column("nextSerial", .integer).notNull()
            table.column("dropped", .integer).notNull()
        }
    }

    /// A pending request as the store keeps it.
    public struct AlertRequestRow: Sendable, Hashable {
        public var app: String
        public var id: String
        public var record: String

        public init(app: String, id: String, record: String) {
            self.app = app
            self.id = id
            self.record = record
        }
    }

    /// One entry of an app's delivered list.
    public struct AlertDeliveredRow: Sendable, Hashable {
        public var app: String
        public var serial: Int64
        public var entry: String
        /// The desktop of the app's user owes it nothing more: an agent of that user was sent it, it went to the
        /// app alone, or it was answered.
        public var shown: Bool

        public init(app: String, serial: Int64, entry: String, shown: Bool = false) {
            self.app = app
            self.serial = serial
            self.entry = entry
            self.shown = shown
        }
    }

    /// An app's badge and the counters of its delivered list.
    public struct AlertAppRow: Sendable, Hashable {
        public var app: String
        public var badge: Int?
        /// The serial the next delivered entry takes.
        public var nextSerial: Int64
        /// Entries that went out of the list for room since it was last emptied.
        public var dropped: Int64

        public init(app: String, badge: Int?, nextSerial: Int64, dropped: Int64) {
            self.app = app
            self.badge = badge
            self.nextSerial = nextSerial
            self.dropped = dropped
        }
    }

    /// One change to what the store keeps of notifications, written whole in one transaction.
    public struct AlertChange: Sendable {
        public var keep: [AlertRequestRow] = []
        public var forget: [(app: String, id: String)] = []
        public var deliver: [AlertDeliveredRow] = []
        public var undeliver: [(app: String, serial: Int64)] = []
        /// Delivered entries the desktop of their app's user owes nothing more (an entry gone meanwhile is skipped).
        public var shown: [(app: String, serial: Int64)] = []
        public var apps: [AlertAppRow] = []

        public init() {}

        /// A change of nothing: committed after every write submitted before it, so that waiting for it waits for them.
        public static let barrier = AlertChange()

        public var isEmpty: Bool {
            self.keep.isEmpty && self.forget.isEmpty && self.deliver.isEmpty && self.undeliver.isEmpty && self.shown.isEmpty && self.apps.isEmpty
        }
    }

    public func alertRequestRows() throws(StoreError) -> [AlertRequestRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, id, record FROM alertRequest ORDER BY app, id").map {
                AlertRequestRow(app: $0["app"], id: $0["id"], record: $0["record"])
            }
        }
    }

    public func alertDeliveredRows() throws(StoreError) -> [AlertDeliveredRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, serial, entry, shown FROM alertDelivered ORDER BY app, serial").map {
                AlertDeliveredRow(app: $0["app"], serial: $0["serial"], entry: $0["entry"], shown: $0["shown"])
            }
        }
    }

    public func alertAppRows() throws(StoreError) -> [AlertAppRow] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT app, badge, nextSerial, dropped FROM alertApp ORDER BY app").map {
                AlertAppRow(app: $0["app"], badge: $0["badge"], nextSerial: $0["nextSerial"], dropped: $0["dropped"])
            }
        }
    }

    /// Queues `change` for the next transaction and returns what tells of its commit: submitted in the order the
    /// daemon decided the changes, committed in that order.
    public func write(_ change: AlertChange) -> StoreCommit {
        self.write { transaction in
            for row in change.keep {
                try transaction.run(
                    "INSERT INTO alertRequest (app, id, record) VALUES (?, ?, ?) ON CONFLICT(app, id) DO UPDATE SET record = excluded.record",
                    [row.app, row.id, row.record]
                )
            }
            for key in change.forget {
                try transaction.run("DELETE FROM alertRequest WHERE app = ? AND id = ?", [key.app, key.id])
            }
            for row in change.deliver {
                try transaction.run(
                    "INSERT OR REPLACE INTO alertDelivered (app, serial, entry, shown) VALUES (?, ?, ?, ?)",
                    [row.app, row.serial, row.entry, row.shown]
                )
            }
            for key in change.undeliver {
                try transaction.run("DELETE FROM alertDelivered WHERE app = ? AND serial = ?", [key.app, key.serial])
            }
            for key in change.shown {
                try transaction.run("UPDATE alertDelivered SET shown = 1 WHERE app = ? AND serial = ?", [key.app, key.serial])
            }
            for row in change.apps {
                try transaction.run(
                    """
                        INSERT INTO alertApp (app, badge, nextSerial, dropped) VALUES (?, ?, ?, ?)
                        ON CONFLICT(app) DO UPDATE SET badge = excluded.badge, nextSerial = excluded.nextSerial,
                            dropped = excluded.dropped
                        """,
                    [row.app, row.badge, row.nextSerial, row.dropped]
                )
            }
        }
    }
}
