import CoalesceCore
import CoalesceStore

/// A journal watch's position that a post carries: the watch has posted to the app every entry it matched up to
/// the entry `cursor` names.
struct JournalMark: Sendable {
    var watch: WatchName
    var cursor: String
}

/// The journal positions of an app's posts, kept so that each goes into the very write its post goes into: on
/// disk together or not at all, which is what makes a watch's delivery exactly once across a crash. Positions of
/// posts not yet in a write wait; a write made, or joined, takes all of them (every waiting post goes into it).
struct JournalMarks {
    /// By watch, the latest position of posts not yet in a write.
    private var waiting: [WatchName: String] = [:]
    /// By watch, the positions in the write with the store, which a join writes again.
    private var inWrite: [WatchName: String] = [:]

    mutating func add(_ mark: JournalMark) {
        self.waiting[mark.watch] = mark.cursor
    }

    /// The rows of a new write, which takes every waiting post.
    mutating func intoNewWrite() -> [EventRow] {
        self.inWrite = self.waiting
        self.waiting = [:]
        return Self.rows(self.inWrite)
    }

    /// The rows a join puts back at the end of the write it changes: those it had, and the waiting ones.
    func joiningWrite() -> [EventRow] {
        guard !self.waiting.isEmpty || !self.inWrite.isEmpty else { return [] }
        return Self.rows(self.inWrite.merging(self.waiting) { $1 })
    }

    /// The join took the waiting posts into the write.
    mutating func joined() {
        guard !self.waiting.isEmpty else { return }
        self.inWrite.merge(self.waiting) { $1 }
        self.waiting = [:]
    }

    /// The store answered the write: its positions are on disk, or failed with its posts.
    mutating func writeFinished() {
        self.inWrite = [:]
    }

    private static func rows(_ marks: [WatchName: String]) -> [EventRow] {
        marks.sorted { $0.key < $1.key }.map { EventRow.journalPosition(watch: $0.key.value, cursor: $0.value) }
    }
}
