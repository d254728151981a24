import GRDB
import Synchronization

/// The store's writable connections: opened with the store, or, when the disk was full then, by the first write
/// that finds room. Opening them writes (GRDB makes the log non-empty, so that its readers can open it), so a start
/// on a full disk reads through read-only connections until then.
final class StoreWriter: Sendable {
    let path: String
    private let pool: Mutex<DatabasePool?>

    init(path: String, pool: DatabasePool?) {
        self.path = path
        self.pool = Mutex(pool)
    }

    /// The writable connections, opened now if they are not yet.
    /// - Throws: ``StoreError/diskFull(path:)`` while there is no room to open them; what ``open(_:)`` throws.
    func get() throws(StoreError) -> DatabasePool {
        let result = self.pool.withLock { pool -> Result<DatabasePool, StoreError> in
            if let pool { return .success(pool) }
            do throws(StoreError) {
                let opened = try Self.open(self.path)
                pool = opened
                return .success(opened)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Opens writable connections on the store at `path` that sync every commit.
    /// - Throws: ``StoreError``: a full disk, a database that cannot be opened, or one SQLite would not sync.
    static func open(_ path: String) throws(StoreError) -> DatabasePool {
        var configuration = Configuration()
        configuration.journalMode = .wal
        let pool: DatabasePool
        let synchronous: Int?
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // FULL: a commit is on disk (the WAL synced) when it returns; that is what an answered write promises.
            // Set here on the writer, not in `prepareDatabase`: the pool turns WAL on after that has run, and sets
            // NORMAL as it does (which syncs only at checkpoints), so a FULL set there never took effect.
            synchronous = try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                return try Int.fetchOne(db, sql: "PRAGMA synchronous")
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            // Not damage: moving the store aside is not what to do.
            throw .diskFull(path: path)
        } catch {
            throw .cannotOpen(path: path, reason: "\(error)")
        }
        guard synchronous == Store.synchronousFull else { throw .notSynchronous(path: path, synchronous: synchronous ?? -1) }
        return pool
    }
}
