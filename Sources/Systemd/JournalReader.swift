import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Reads the local journal (`sd_journal`): matches, cursors, and waiting for new entries.
///
/// Not thread-safe, like the `sd_journal` it wraps: use one reader from one thread.
public final class JournalReader {
    private let journal: OpaquePointer

    /// Opens the journal files of the local machine.
    public init() throws(SystemdError) {
        var journal: OpaquePointer?
        try SystemdError.check(sd_journal_open(&journal, Int32(SD_JOURNAL_LOCAL_ONLY)), "open the journal")
        self.journal = journal!  // set on success
    }

    deinit {
        sd_journal_close(self.journal)
    }

    /// Restricts the entries to those with `FIELD=value`; matches on different fields all apply, matches on the
    /// same field are alternatives, as journalctl combines them.
    public func addMatch(_ assignment: String) throws(SystemdError) {
        let bytes = Array(assignment.utf8)
        try SystemdError.check(
            bytes.withUnsafeBytes { sd_journal_add_match(self.journal, $0.baseAddress, $0.count) },
            "add journal match \(assignment)"
        )
    }

    public func seekHead() throws(SystemdError) {
        try SystemdError.check(sd_journal_seek_head(self.journal), "seek to the journal's head")
    }

    public func seekTail() throws(SystemdError) {
        try SystemdError.check(sd_journal_seek_tail(self.journal), "seek to the journal's tail")
    }

    /// Positions the reader at the entry a cursor names; ``next()`` then reads that entry.
    public func seek(cursor: String) throws(SystemdError) {
        try SystemdError.check(sd_journal_seek_cursor(self.journal, cursor), "seek to cursor")
    }

    /// Moves to the next matching entry; `false` at the end.
    public func next() throws(SystemdError) -> Bool {
        try SystemdError.check(sd_journal_next(self.journal), "read the next journal entry") > 0
    }

    /// Moves to the previous matching entry; `false` at the start.
    public func previous() throws(SystemdError) -> Bool {
        try SystemdError.check(sd_journal_previous(self.journal), "read the previous journal entry") > 0
    }

    /// The current entry's cursor, which names it across restarts.
    public func cursor() throws(SystemdError) -> String {
        var cursor: UnsafeMutablePointer<CChar>?
        try SystemdError.check(sd_journal_get_cursor(self.journal, &cursor), "get the journal cursor")
        defer { free(cursor) }
        return String(cString: cursor!)  // set on success
    }

    /// Whether the current entry is the one `cursor` names.
    public func isAt(cursor: String) throws(SystemdError) -> Bool {
        try SystemdError.check(sd_journal_test_cursor(self.journal, cursor), "test the journal cursor") > 0
    }

    /// One field of the current entry, or `nil` when the entry does not have it.
    public func field(_ name: String) throws(SystemdError) -> String? {
        var data: UnsafeRawPointer?
        var length = 0
        let result = sd_journal_get_data(self.journal, name, &data, &length)
        if result == -ENOENT { return nil }
        try SystemdError.check(result, "read journal field \(name)")
        return Self.value(of: UnsafeRawBufferPointer(start: data, count: length)).1
    }

    /// Every field of the current entry.
    public func entry() throws(SystemdError) -> [String: String] {
        var fields: [String: String] = [:]
        var data: UnsafeRawPointer?
        var length = 0
        sd_journal_restart_data(self.journal)
        while true {
            let result = sd_journal_enumerate_available_data(self.journal, &data, &length)
            if result == 0 { break }
            try SystemdError.check(result, "read journal fields")
            let (name, value) = Self.value(of: UnsafeRawBufferPointer(start: data, count: length))
            fields[name] = value
        }
        return fields
    }

    /// Waits until the journal changes or `timeout` passes; `true` when entries were added.
    public func wait(timeout: Duration) throws(SystemdError) -> Bool {
        let result = try SystemdError.check(
            sd_journal_wait(self.journal, timeout.systemdMicroseconds),
            "wait for the journal"
        )
        return result == Int32(SD_JOURNAL_APPEND) || result == Int32(SD_JOURNAL_INVALIDATE)
    }

    /// Splits `FIELD=value` data; values may be binary, and are read as UTF-8 with replacement.
    private static func value(of data: UnsafeRawBufferPointer) -> (String, String) {
        guard let equals = data.firstIndex(of: UInt8(ascii: "=")) else {
            return (String(decoding: data, as: UTF8.self), "")
        }
        return (
            String(decoding: data[..<equals], as: UTF8.self),
            String(decoding: data[(equals + 1)...], as: UTF8.self)
        )
    }
}
