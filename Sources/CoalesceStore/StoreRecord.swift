#if canImport(Glibc)
import Glibc
#endif

/// What the daemon records beside the database (`coalesced.db.state`), for the checks at the next start that SQLite
/// cannot make: that the database existed (an empty or missing one is then damage, not a first start), and whether
/// the daemon that last had it open stopped cleanly (if it did not, the write-ahead log it was writing must still be
/// there: SQLite deletes the log only when the last connection closes, and a stop leaves it checkpointed and empty).
///
/// The file is replaced whole (written beside, synced, renamed, the directory synced), so a crash leaves the old
/// record or the new one.
struct StoreRecord {
    /// What a record says.
    enum Mark: String {
        /// A daemon had the store open and had not stopped: the log may hold commits the database does not.
        case open
        /// The daemon that had it open stopped cleanly: everything is in the database, and the log is empty.
        case closed
    }

    let path: String
    private let directory: String

    init(directory: String) {
        self.directory = directory
        self.path = directory + "/coalesced.db.state"
    }

    /// The mark recorded, or `nil` when there is no record (a first start, or a store of a version before records).
    /// A record that says anything else is read as ``Mark/open``, the one of the two that checks more.
    func read() throws(StoreError) -> Mark? {
        let descriptor = open(self.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw .cannotRead(path: self.path, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count >= 0 else { throw .cannotRead(path: self.path, reason: String(cString: strerror(errno))) }
        let text = String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").first.map(String.init)
        return text.flatMap(Mark.init(rawValue:)) ?? .open
    }

    /// Records `mark`, durably, in place of what was recorded.
    /// - Throws: ``StoreError`` when it cannot be written (a full disk says so).
    func write(_ mark: Mark) throws(StoreError) {
        let temporary = self.path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw self.failure(temporary) }
        let line = mark.rawValue + "\n"
        let written = line.withCString { Glibc.write(descriptor, $0, strlen($0)) }
        guard written == line.utf8.count, fsync(descriptor) == 0 else {
            let error = self.failure(temporary)
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, self.path) == 0 else { throw self.failure(self.path) }
        let directory = open(self.directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw self.failure(self.directory) }
        defer { close(directory) }
        guard fsync(directory) == 0 else { throw self.failure(self.directory) }
    }

    private func failure(_ path: String) -> StoreError {
        errno == ENOSPC || errno == EDQUOT
            ? .diskFull(path: path) : .cannotWrite(path: path, reason: String(cString: strerror(errno)))
    }
}
