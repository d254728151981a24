import Systemd

/// One daemon per store: an exclusive lock (``LockFile``) on `coalesced.lock` in the state directory, held from
/// before the store's files are looked at until the process ends, with the holder's pid written in the file for
/// the one refused.
///
/// Why `flock(2)` on a file of its own, and not SQLite's `PRAGMA locking_mode=EXCLUSIVE`:
/// - the store opens several connections (a writer and readers, GRDB's pool); an exclusive locking mode would lock
///   the daemon's own readers out;
/// - the lock must be held before anything reads the database's files (the checks of the write-ahead log and of the
///   record beside the database, the registry import), not from the first transaction on;
/// - SQLite's refusal is a busy error at the first access, which names neither the directory nor the holder.
///
/// And not a POSIX record lock (`F_SETLK`, whose `F_GETLK` would give the holder's pid): such a lock is released
/// when the process closes *any* descriptor of the file.
final class StoreLock: Sendable {
    /// The lock file's path.
    var path: String { self.lock.path }
    private let lock: LockFile

    /// Takes the lock on `directory`, or throws.
    /// - Throws: ``StoreError/inUse(directory:pid:)`` when another process holds it, naming that process when its
    ///   pid can be read; ``StoreError/cannotOpen(path:reason:)`` when the lock file cannot be opened.
    init(directory: String) throws(StoreError) {
        let path = directory + "/coalesced.lock"
        do throws(LockFile.Failure) {
            self.lock = try LockFile(path: path)
        } catch {
            switch error {
            case .held(let pid): throw .inUse(directory: directory, pid: pid)
            case .failed: throw .cannotOpen(path: path, reason: error.reason)
            }
        }
    }
}
