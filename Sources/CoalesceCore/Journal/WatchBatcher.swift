/// The flood bound of journal watches: how the entries one watch matched for one app become posts.
///
/// Each (watch, app) may post `allowance` times per `interval` (once for a coalescing policy, `burst` times for a
/// queue); an entry that finds the allowance used waits, folded with those after it into one batch (their count and
/// the last of them), which is posted when the interval ends. So a quiet watch posts each entry at once, and one
/// that floods costs one post per interval whatever the rate; a suspended app's inbox then folds the batches into
/// one row per kind. Pure: the caller passes the time and carries the batches out.
public struct WatchBatcher<Instant: InstantProtocol, Entry: Sendable>: Sendable where Instant.Duration == Duration {
    public struct Key: Sendable, Hashable {
        public var watch: WatchName
        public var app: AppName

        public init(watch: WatchName, app: AppName) {
            self.watch = watch
            self.app = app
        }
    }

    /// Entries to post as one event: how many, and the last of them with its cursor.
    public struct Batch: Sendable {
        public var key: Key
        public var entries: Int
        public var last: Entry
        public var cursor: JournalCursor
    }

    private struct Window {
        var start: Instant
        var posts: Int
        var pending: Batch?
    }

    public let interval: Duration
    public let burst: Int
    private var windows: [Key: Window] = [:]

    /// - Parameters:
    ///   - interval: the window each (watch, app) posts in at most its allowance.
    ///   - burst: a queue policy's allowance per window (each entry is its own event up to it).
    public init(interval: Duration, burst: Int) {
        self.interval = interval
        self.burst = max(1, burst)
    }

    /// Takes one matched entry; returns what to post now, in order (a batch whose window ended, then this entry
    /// when the allowance lets it go at once).
    public mutating func add(_ key: Key, _ entry: Entry, cursor: JournalCursor, queue: Bool, at now: Instant) -> [Batch] {
        var posts: [Batch] = []
        var window = self.windows[key] ?? Window(start: now, posts: 0)
        if window.start.advanced(by: self.interval) <= now {
            if let pending = window.pending { posts.append(pending) }
            window = Window(start: now, posts: posts.isEmpty ? 0 : 1)
        }
        let allowance = queue ? self.burst : 1
        if window.pending == nil, window.posts < allowance {
            window.posts += 1
            posts.append(Batch(key: key, entries: 1, last: entry, cursor: cursor))
        } else if var pending = window.pending {
            pending.entries += 1
            pending.last = entry
            pending.cursor = cursor
            window.pending = pending
        } else {
            window.pending = Batch(key: key, entries: 1, last: entry, cursor: cursor)
        }
        self.windows[key] = window
        return posts
    }

    /// The batches whose window has ended by `now`, in no particular order; their keys start a new window with
    /// the batch as its first post.
    public mutating func due(at now: Instant) -> [Batch] {
        var posts: [Batch] = []
        for (key, window) in self.windows where window.start.advanced(by: self.interval) <= now {
            if let pending = window.pending {
                posts.append(pending)
                self.windows[key] = Window(start: now, posts: 1)
            } else {
                self.windows[key] = nil  // quiet for a whole window: forgotten
            }
        }
        return posts
    }

    /// When the next window with entries waiting ends.
    public var nextDue: Instant? {
        self.windows.values.compactMap { $0.pending == nil ? nil : $0.start.advanced(by: self.interval) }.min()
    }

    /// Whether entries of `watch` wait for their window to end.
    public func hasPending(_ watch: WatchName) -> Bool {
        self.windows.contains { $0.key.watch == watch && $0.value.pending != nil }
    }

    /// Forgets everything of `watch` (removed), or of every watch (the reader reads again from the stored
    /// positions).
    public mutating func forget(_ watch: WatchName? = nil) {
        guard let watch else { return self.windows.removeAll() }
        self.windows = self.windows.filter { $0.key.watch != watch }
    }
}
