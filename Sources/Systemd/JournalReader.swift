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

    /// Drops every match: all entries again.
    public func flushMatches() {
        sd_journal_flush_matches(self.journal)
    }

    /// Ends the group of matches added so far: the entries of the groups before or of the ones after are read.
    public func addDisjunction() throws(SystemdError) {
        try SystemdError.check(sd_journal_add_disjunction(self.journal), "add a journal match group")
    }

    /// Positions the reader before the first entry written at or after `microseconds` since the epoch.
    public func seek(realtimeMicroseconds microseconds: UInt64) throws(SystemdError) {
        try SystemdError.check(sd_journal_seek_realtime_usec(self.journal, microseconds), "seek to a time in the journal")
    }

    /// The descriptor that becomes readable when the journal changes (``process()`` says how); taking it early
    /// makes sd-journal watch its files from then on.
    public func descriptor() throws(SystemdError) -> Int32 {
        try SystemdError.check(sd_journal_get_fd(self.journal), "get the journal's descriptor")
    }

    /// What changed since the last call, after the descriptor woke the caller.
    public enum Change: Sendable {
        case nothing
        /// Entries were added.
        case appended
        /// Files were added or removed (rotation, vacuuming): read on, as after ``appended``.
        case invalidated
    }

    /// Takes in the changes the descriptor announced.
    public func process() throws(SystemdError) -> Change {
        switch try SystemdError.check(sd_journal_process(self.journal), "process the journal's changes") {
        case Int32(SD_JOURNAL_APPEND): .appended
        case Int32(SD_JOURNAL_INVALIDATE): .invalidated
        default: .nothing
        }
    }

    /// The current entry's wall-clock time, in microseconds since the epoch.
    public func realtimeMicroseconds() throws(SystemdError) -> UInt64 {
        var microseconds: UInt64 = 0
        try SystemdError.check(sd_journal_get_realtime_usec(self.journal, &microseconds), "read the entry's time")
        return microseconds
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

    /// Whether the journal's files were found damaged or changed under the reader while it read (EBADMSG,
    /// EADDRNOTAVAIL): it should seek again rather than read on.
    public static func needsSeek(_ error: SystemdError) -> Bool {
        error.errno == EBADMSG || error.errno == EADDRNOTAVAIL
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

    /// Waits until the journal changes, `wake` (a descriptor another thread makes readable, such as an eventfd) is
    /// readable, or `timeout` passes (`nil`: no end), and takes in the journal's changes; returns them. Waits as
    /// sd-journal asks (its descriptor's events, and its own timeout where files cannot be watched).
    public func wait(timeout: Duration?, wake: Int32) throws(SystemdError) -> Change {
        let journalDescriptor = try self.descriptor()
        let events = try SystemdError.check(sd_journal_get_events(self.journal), "get the journal's events")
        var milliseconds: Int32 = timeout.map { Int32(clamping: $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? -1
        var until: UInt64 = 0
        if sd_journal_get_timeout(self.journal, &until) >= 0, until != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let current = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            let journalMilliseconds = until > current ? Int32(clamping: (until - current + 999) / 1000) : 0
            milliseconds = milliseconds < 0 ? journalMilliseconds : min(milliseconds, journalMilliseconds)
        }
        var descriptors = [
            pollfd(fd: journalDescriptor, events: Int16(truncatingIfNeeded: events), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&descriptors, 2, max(milliseconds, -1))
        if ready < 0, errno != EINTR { throw SystemdError(operation: "wait for the journal", errno: errno) }
        return try self.process()
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
