import GRDB

/// Why the store cannot be opened, read or written: what SQLite reports, sorted into what a person can act on.
/// Each message names the file and says what to do.
public enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file system holding the store is full (`SQLITE_FULL`): the write was not made.
    case diskFull(path: String)
    /// The store holds what this daemon cannot read (`what`, named): it refuses to start rather than leave it out.
    case damaged(path: String, what: String)
    /// The file could not be opened as this daemon's database, or its schema not brought up to date.
    case cannotOpen(path: String, reason: String)
    /// SQLite would not sync each commit (`PRAGMA synchronous` read back as `synchronous`, not FULL): an answered
    /// write could be lost.
    case notSynchronous(path: String, synchronous: Int)
    /// A read failed.
    case cannotRead(path: String, reason: String)
    /// A write failed, other than for a full disk.
    case cannotWrite(path: String, reason: String)
    /// Another daemon holds the state directory's lock (`pid`, when the lock file names it): two daemons writing
    /// one store would each answer posts the other's writes then lose.
    case inUse(directory: String, pid: Int32?)
    /// The database is missing or empty, though the record beside it (`record`) says the daemon had made it.
    case missing(path: String, record: String)
    /// The write-ahead log `path` is missing, though the record beside the database (`record`) says the daemon that
    /// last had the store open did not stop cleanly: the commits it held that were not yet copied into the database
    /// are gone with it.
    case logMissing(path: String, record: String)
    /// The write-ahead log `path` holds commits SQLite would drop (`what`, named): a frame fails its checksum and
    /// commits made after it follow, and SQLite reads a log only up to its first bad frame.
    case logDamaged(path: String, what: String, database: String, record: String)

    public var description: String {
        switch self {
        case .diskFull(let path): return "the file system holding \(path) is full; free space there (nothing was written)"
        case .damaged(let path, let what): return "\(path) is damaged (\(what)); move it aside to start with an empty store"
        case .cannotOpen(let path, let reason):
            return "\(path) cannot be used (\(reason)); move it aside to start with an empty store"
        case .notSynchronous(let path, let synchronous):
            return "SQLite would not sync each commit to \(path) (PRAGMA synchronous is \(synchronous))"
        case .cannotRead(let path, let reason): return "cannot read \(path): \(reason)"
        case .cannotWrite(let path, let reason): return "cannot write \(path): \(reason)"
        case .inUse(let directory, let pid):
            let holder = pid.map { "another coalesced (pid \($0))" } ?? "another coalesced"
            return "\(directory) is in use by \(holder); stop it, or give this daemon a --state-dir of its own"
        case .missing(let path, let record):
            return "\(path) is missing or empty, though \(record) says the store was made there; restore it from a "
                + "backup, or remove \(record) to start with an empty store"
        case .logMissing(let path, let record):
            return "\(path) is missing, though \(record) says the daemon that last had the store open did not stop "
                + "cleanly, so commits it held are lost; put it back, or remove \(record) to start with what is left"
        case .logDamaged(let path, let what, let database, let record):
            return "\(path) is damaged (\(what)); restore it from a backup, or keep the commits before the damage "
                + "with `sqlite3 \(database) 'PRAGMA wal_checkpoint(TRUNCATE)'` and remove \(record)"
        }
    }

    /// A failed write to the store at `path`; a full disk says so, since that is what a person can act on.
    init(writing path: String, _ error: any Error) {
        if let error = error as? StoreError {
            self = error
        } else if let error = error as? DatabaseError, error.resultCode == .SQLITE_FULL {
            self = .diskFull(path: path)
        } else {
            self = .cannotWrite(path: path, reason: "\(error)")
        }
    }
}
