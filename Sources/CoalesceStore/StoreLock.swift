#if canImport(Glibc)
import Glibc
#endif

/// One daemon per store: an exclusive lock on `coalesced.lock` in the state directory, held from before the store's
/// files are looked at until the process ends, with the holder's pid written in the file for the one refused.
///
/// Why `flock(2)` on a file of its own, and not SQLite's `PRAGMA locking_mode=EXCLUSIVE`:
/// - the store opens several connections (a writer and readers, GRDB's pool); an exclusive locking mode would lock
///   the daemon's own readers out;
/// - the lock must be held before anything reads the database's files (the checks of the write-ahead log and of the
///   record beside the database, the registry import), not from the first transaction on;
/// - SQLite's refusal is a busy error at the first access, which names neither the directory nor the holder.
///
/// And not a POSIX record lock (`F_SETLK`, whose `F_GETLK` would give the holder's pid): such a lock is released
/// when the process closes *any* descriptor of the file. A `flock` belongs to the open file description, which only
/// this value holds (close-on-exec, so no child inherits it), and the kernel releases it when the process dies,
/// however it dies.
final class StoreLock: Sendable {
    /// The lock file's path.
    let path: String
    private let descriptor: Int32

    /// Takes the lock on `directory`, or throws.
    /// - Throws: ``StoreError/inUse(directory:pid:)`` when another process holds it, naming that process when its
    ///   pid can be read; ``StoreError/cannotOpen(path:reason:)`` when the lock file cannot be opened.
    init(directory: String) throws(StoreError) {
        self.path = directory + "/coalesced.lock"
        let descriptor = open(self.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .cannotOpen(path: self.path, reason: String(cString: strerror(errno)))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            let holder = Self.pid(in: descriptor)
            close(descriptor)
            guard failure == EWOULDBLOCK else {
                throw .cannotOpen(path: self.path, reason: String(cString: strerror(failure)))
            }
            throw .inUse(directory: directory, pid: holder)
        }
        self.descriptor = descriptor
        // Only for the message of a daemon refused: if this write fails, that message names no pid. Written over
        // the pid before it and then cut to length, not into an emptied file: on a full disk the file's block is
        // all there is to write into.
        let line = "\(getpid())\n"
        let written = line.withCString { pwrite(descriptor, $0, strlen($0), 0) }
        _ = ftruncate(descriptor, off_t(max(written, 0)))
    }

    deinit {
        close(self.descriptor)
    }

    /// The pid the holder wrote, if it has written it yet.
    private static func pid(in descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return text.split(separator: "\n").first.flatMap { Int32($0) }.flatMap { $0 > 0 ? $0 : nil }
    }
}
