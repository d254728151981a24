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
