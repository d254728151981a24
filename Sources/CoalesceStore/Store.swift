public import CoalesceCore
import Foundation
import GRDB

/// Why the store cannot be opened, read or written. The message names the file and says what to do.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The daemon's durable state in one SQLite database (`coalesced.db` in the state directory, WAL mode): the app
/// registry and the state apps save. Writes that arrive together are committed in one transaction
/// (``GroupCommit``), and each is answered only after that transaction is on disk.
public final class Store: Sendable {
    public let path: String
    private let pool: DatabasePool
    private let commits: GroupCommit

    /// Opens (or creates) the store and brings its schema up to date.
    /// - Throws: ``StoreError`` naming the file when it is not a database this daemon can use; the daemon refuses
    ///   to start rather than begin empty.
    public init(stateDirectory: String) throws(StoreError) {
        self.path = stateDirectory + "/coalesced.db"
        var configuration = Configuration()
        configuration.journalMode = .wal
        // FULL: a commit is on disk when it returns, WAL or not; that is what an answered write promises.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        do {
            self.pool = try DatabasePool(path: self.path, configuration: configuration)
            try Self.migrator.migrate(self.pool)
            let check = try self.pool.read { db in try String.fetchOne(db, sql: "PRAGMA quick_check") }
            guard check == "ok" else { throw StoreError("integrity check: \(check ?? "no answer")") }
        } catch let error as StoreError {
            throw StoreError("\(self.path) is damaged (\(error)); move it aside to start with an empty store")
        } catch {
            throw StoreError("\(self.path) cannot be used (\(error)); move it aside to start with an empty store")
        }
        self.commits = GroupCommit(pool: self.pool)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("1: apps and saved state") { db in
            try db.create(table: "app") { table in
                table.column("name", .text).primaryKey()
                table.column("owner", .integer).notNull()
                table.column("backgroundModes", .text).notNull()  // sorted, newline-separated
                table.column("exitsOnSuspend", .boolean).notNull()
                table.column("launchUnit", .text)
            }
            try db.create(table: "savedState") { table in
                table.column("app", .text).primaryKey().references("app", onDelete: .cascade)
                table.column("data", .text).notNull()
            }
        }
        return migrator
    }

    // MARK: Apps

    /// Every registered app.
    public func apps() throws(StoreError) -> [AppRegistration] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT name, owner, backgroundModes, exitsOnSuspend, launchUnit FROM app ORDER BY name")
                .map { row in
                    let name: String = row["name"]
                    let modes: String = row["backgroundModes"]
                    return AppRegistration(
                        name: try AppName(name),
                        owner: UInt32(truncatingIfNeeded: row["owner"] as Int64),
                        traits: AppTraits(
                            backgroundModes: Set(modes.split(separator: "\n").map(String.init)),
                            exitsOnSuspend: row["exitsOnSuspend"]
                        ),
                        launchUnit: row["launchUnit"]
                    )
                }
        }
    }

    /// How many apps are registered.
    public func appCount() throws(StoreError) -> Int {
        try self.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM app") ?? 0 }
    }

    /// Registers or updates an app; on disk when this returns.
    public func save(_ registration: AppRegistration) async throws(StoreError) {
        try await self.commits.write { db in try Self.upsert(registration, db) }
    }

    /// Registers many apps in one transaction (an import).
    public func save(all registrations: [AppRegistration]) async throws(StoreError) {
        try await self.commits.write { db in
            for registration in registrations { try Self.upsert(registration, db) }
        }
    }

    private static func upsert(_ registration: AppRegistration, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO app (name, owner, backgroundModes, exitsOnSuspend, launchUnit) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, backgroundModes = excluded.backgroundModes,
                    exitsOnSuspend = excluded.exitsOnSuspend, launchUnit = excluded.launchUnit
                """,
            arguments: [
                registration.name.value, Int64(registration.owner),
                registration.traits.backgroundModes.sorted().joined(separator: "\n"),
                registration.traits.exitsOnSuspend, registration.launchUnit,
            ]
        )
    }

    // MARK: Saved state

    /// What the app last saved, if anything.
    public func savedState(of app: AppName) throws(StoreError) -> String? {
        try self.read { db in try String.fetchOne(db, sql: "SELECT data FROM savedState WHERE app = ?", arguments: [app.value]) }
    }

    /// Keeps `data` for the app, or forgets what it kept; on disk when this returns.
    public func saveState(of app: AppName, _ data: String?) async throws(StoreError) {
        try await self.commits.write { db in
            if let data {
                try db.execute(
                    sql: "INSERT INTO savedState (app, data) VALUES (?, ?) ON CONFLICT(app) DO UPDATE SET data = excluded.data",
                    arguments: [app.value, data]
                )
            } else {
                try db.execute(sql: "DELETE FROM savedState WHERE app = ?", arguments: [app.value])
            }
        }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try self.pool.read(body)
        } catch {
            throw StoreError("cannot read \(self.path): \(error)")
        }
    }
}
