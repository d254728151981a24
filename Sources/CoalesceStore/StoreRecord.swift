import Systemd

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
    /// The record's name in the state directory.
    private static let name = "coalesced.db.state"

    init(directory: String) {
        self.directory = directory
        self.path = directory + "/" + Self.name
    }

    /// The mark recorded, or `nil` when there is no record (a first start, or a store of a version before records).
    /// A record that says anything else is read as ``Mark/open``, the one of the two that checks more.
    func read() throws(StoreError) -> Mark? {
        let bytes: [UInt8]
        do throws(SystemdError) {
            // Its first 64 bytes: a record is one short line.
            bytes = try ReadableFile(self.path).readPrefix(64)
        } catch {
            if error.errno == Errno.ENOENT { return nil }
            throw .cannotRead(path: self.path, reason: error.reason)
        }
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init)
        return text.flatMap(Mark.init(rawValue:)) ?? .open
    }

    /// Records `mark`, durably, in place of what was recorded.
    /// - Throws: ``StoreError`` when it cannot be written (a full disk says so).
    func write(_ mark: Mark) throws(StoreError) {
        do throws(FileError) {
            try ReplacedFile.replace(Self.name, in: self.directory, with: Array((mark.rawValue + "\n").utf8))
        } catch {
            throw error.isDiskFull ? .diskFull(path: error.path) : .cannotWrite(path: error.path, reason: error.reason)
        }
    }
}
