/// Where the journal watches stand in the journal, as a pure state machine: which entries each watch skips
/// because they were delivered before, where the reader reads from, when it reads again, and when a watch writes
/// its own position. Each input returns what to do, as values (post these batches, write this position, seek
/// there); it knows nothing of sd-journal, the store or the clock. It holds the flood bound (``WatchBatcher``),
/// as a batch still folding is one the watch has read and not posted.
///
/// The rules, each decided here and nowhere else:
/// - A watch skips every entry up to its own position (written once everything it matched before it was posted),
///   and the entry there; it has then caught up: it has read everything up to where the reader is.
/// - An app skips every entry of a watch up to the watch's position for that app (written with the posts it
///   stands for), and the entry there. So an entry read again after a restart, a failed write or a change of
///   watches is posted to each app once.
/// - A watch without an own position but with positions for apps reads from the earliest of them; a new watch
///   from where it starts (``WatchStart``), which is written as its position at once.
/// - The reader reads from the earliest position a watch needs: a caught-up watch without a position needs the
///   reader's; one that reads from the head makes the reader read from there. The reader's position is then that
///   one until a pass ends.
/// - A post whose write failed makes the reader read again from the positions on disk, once no post of any watch
///   is in flight; until then no watch writes its own position, and none posts (a post kept meanwhile would carry
///   its app's position past the entries of the failed one, which the rewind reads again). A post stays in flight
///   across a change of its watch (redefined, or removed and added again), as its write is answered all the same.
/// - A watch redefined (same name, another definition) reads again from its stored positions, with nothing of what
///   its old definition was folding; each app skips what the old definition posted to it, on disk or in flight.
/// - A read error makes each watch skip, besides what it had read by the last pass's end, every entry it matched
///   in the pass the error broke off (posted or folding).
/// - At most once per ``idleWriteInterval``, each watch with nothing in flight, nothing folding and nothing left
///   to skip writes the reader's position as its own, if that is not the one it wrote last.
///
/// - `Instant`: the time the flood bound and the idle writes are measured in, passed in with each input.
/// - `Entry`: what a batch carries of the entries it stands for (their payload).
public struct WatchPositions<Instant: InstantProtocol, Entry: Sendable>: Sendable where Instant.Duration == Duration {
    public typealias Batcher = WatchBatcher<Instant, Entry>
    public typealias Batch = Batcher.Batch

    /// How often at most the watches write their own positions.
    public static var idleWriteInterval: Duration { .seconds(1) }

    /// What the shell does, in the order given.
    public enum Action: Sendable {
        /// Post this batch to its app, carrying its cursor into the write that keeps it; tell ``posted(_:)`` if
        /// the post was taken.
        case post(Batch)
        /// Write `cursor` as the watch's own position.
        case writePosition(WatchName, JournalCursor)
        /// Read from the first entry the journal keeps.
        case seekHead
        /// Read from the entry `cursor` names, which every watch has read (it is not read again); if that entry
        /// is gone, from the closest entry after it.
        case seek(after: JournalCursor)
    }

    /// The positions the store holds of one watch.
    public struct Stored: Sendable, Hashable {
        /// The watch's own position.
        public var own: JournalCursor?
        /// By app, the position its last stored post stands for.
        public var apps: [AppName: JournalCursor]

        public init(own: JournalCursor?, apps: [AppName: JournalCursor] = [:]) {
            self.own = own
            self.apps = apps
        }
    }

    /// One watch as the reader follows it.
    private struct Watch: Sendable {
        var definition: JournalWatch
        /// Entries at or before it were read for the watch before (by an earlier run, or before a seek back).
        var skip: JournalCursor?
        /// By app, the position up to which the watch posted to it (written with those posts).
        var appSkips: [AppName: JournalCursor] = [:]
        /// By app, the last entry of the posts taken since the watch was placed (in flight or answered), handed on
        /// to a new definition of it.
        var posted: [AppName: JournalCursor] = [:]
        /// The last entry it matched: it has read up to there, even in a pass that a read error broke off.
        var matched: JournalCursor?
        /// Its own position last written.
        var written: JournalCursor?
        /// It has read an entry past where it started: it has read everything up to the reader's position (a
        /// watch that has not may be waiting for a seek back to reach its start).
        var caughtUp = false
    }

    private var watches: [WatchName: Watch] = [:]
    /// By watch name, its posts not yet answered (none: no key). Kept apart from the watches, as a post of a
    /// definition since changed or removed is answered all the same.
    private var inFlight: [WatchName: Int] = [:]
    /// The watches followed, in the order given.
    public private(set) var order: [WatchName] = []
    /// Where the watches without a position start, as last given: a rewind starts them there again.
    public private(set) var starts: [WatchName: WatchStart] = [:]
    /// Where the reader has read up to for every caught-up watch: the last entry of the last pass it finished, or
    /// where it was placed since (`nil`: the head, or nothing read yet).
    public private(set) var position: JournalCursor?
    /// A post's write failed: read again from the positions on disk once nothing is in flight.
    public private(set) var rewindWanted = false
    private var lastIdleWrite: Instant
    private var batcher: Batcher

    /// - Parameters:
    ///   - interval, burst: the flood bound's (``WatchBatcher/init(interval:burst:)``).
    ///   - now: when the reader begins: the first idle write is due one ``idleWriteInterval`` after it.
    public init(interval: Duration, burst: Int, now: Instant) {
        self.batcher = Batcher(interval: interval, burst: burst)
        self.lastIdleWrite = now
    }

    /// When the next batch folding is due; none while a rewind waits (``due(at:)`` posts nothing).
    public var nextDue: Instant? { self.rewindWanted ? nil : self.batcher.nextDue }

    // MARK: Watches

    /// Follows `definitions`, in that order; returns the positions to write and where the reader reads from.
    ///
    /// One already followed with the same definition keeps its positions and what it is folding (caught up, it has
    /// read up to the reader's position); another is placed by `stored`, or, without stored positions, by where
    /// `starts` says (the tail by default). A watch redefined forgets what it was folding, which it reads again,
    /// and skips for each app what it posted to it before; one no longer followed forgets what it was folding.
    /// - Parameters:
    ///   - stored: what the store holds, by watch.
    ///   - tail: the newest entry's cursor; asked for only when a new watch starts at the tail.
    ///   - entryBefore: the last entry written before a wall-clock time (µs since the epoch); asked for only when a
    ///     new watch starts at a time.
    public mutating func change(
        to definitions: [JournalWatch],
        stored: [WatchName: Stored],
        starts: [WatchName: WatchStart],
        tail: () -> JournalCursor?,
        entryBefore: (UInt64) -> JournalCursor?
    ) -> [Action] {
        self.starts = starts
        var actions: [Action] = []
        var next: [WatchName: Watch] = [:]
        var tailCursor: JournalCursor?
        for definition in definitions {
            let name = definition.name
            if var kept = self.watches[name], kept.definition == definition {
                kept.skip = self.readUpTo(kept)
                next[name] = kept
                continue
            }
            var watch = Watch(definition: definition)
            // Redefined: its stored per-app positions lack the posts still in flight, which it would post again.
            if let old = self.watches[name] {
                watch.posted = old.posted
                for (app, cursor) in old.posted { watch.appSkips[app] = cursor }
            }
            if let positions = stored[name] {
                watch.skip = positions.own
                watch.appSkips.merge(positions.apps) { $1.isAfter($0) ? $1 : $0 }
                // Only per-app positions: the earliest of them is where it reads from.
                if watch.skip == nil { watch.skip = Self.earliest(positions.apps.values) }
            } else {
                switch starts[name] ?? .tail {
                case .tail:
                    if tailCursor == nil { tailCursor = tail() }
                    watch.skip = tailCursor
                case .head:
                    watch.skip = nil
                case .cursor(let text):
                    watch.skip = JournalCursor(text)
                case .time(let microseconds):
                    watch.skip = entryBefore(microseconds)
                }
                if let skip = watch.skip {
                    actions.append(.writePosition(name, skip))
                    watch.written = skip
                }
            }
            next[name] = watch
        }
        for (name, old) in self.watches where next[name]?.definition != old.definition { self.batcher.forget(name) }
        self.watches = next
        self.order = definitions.map(\.name).filter { next[$0] != nil }
        return actions + self.seekToEarliest()
    }

    /// Reads again from the positions on disk, if a post's write failed and no post is in flight: forgets every
    /// watch, what was folding and the reader's position, and returns the watches followed, in order; the shell
    /// then gives them again (``change(to:stored:starts:tail:entryBefore:)``) with what the store holds and
    /// ``starts``. `nil` when no rewind is due.
    public mutating func rewindIfDue() -> [WatchName]? {
        guard self.rewindWanted, self.inFlight.isEmpty else { return nil }
        let order = self.order
        self.rewindWanted = false
        self.batcher.forget()
        self.watches = [:]
        self.order = []
        self.position = nil
        return order
    }

    /// Reading failed (a file damaged or changed under the reader), maybe in the middle of a pass: where to read
    /// from again.
    public mutating func readFailed() -> [Action] {
        for name in self.order {
            guard let watch = self.watches[name] else { continue }
            let skip = self.readUpTo(watch)
            self.watches[name]?.skip = skip
        }
        return self.seekToEarliest()
    }

    /// What `watch` skips when the reader reads again: what it skipped, and what it has read, which is up to the
    /// reader's position when caught up, and at least up to the last entry it matched (a pass broken off by a read
    /// error ends nowhere).
    private func readUpTo(_ watch: Watch) -> JournalCursor? {
        let read = JournalCursor.later(watch.caughtUp ? self.position : nil, watch.matched)
        return JournalCursor.later(watch.skip, read)
    }

    /// The earliest position any watch needs; the head if one has none. The reader's position is then there, so
    /// that a watch that catches up in a pass a read error breaks off is not taken to have read beyond it.
    private mutating func seekToEarliest() -> [Action] {
        guard !self.watches.isEmpty else { return [] }
        var earliest: JournalCursor?
        for watch in self.watches.values {
            // A watch without a position has read up to the reader's position, unless it reads from the head.
            guard let skip = watch.skip ?? (watch.caughtUp ? self.position : nil) else {
                earliest = nil
                break
            }
            earliest = Self.earliest([earliest, skip].compactMap { $0 })
        }
        self.position = earliest
        guard let earliest else { return [.seekHead] }
        return [.seek(after: earliest)]
    }

    private static func earliest(_ cursors: some Sequence<JournalCursor>) -> JournalCursor? {
        cursors.reduce(nil) { earliest, cursor in earliest.map { cursor.isAfter($0) ? $0 : cursor } ?? cursor }
    }

    // MARK: Entries

    /// Whether `watch` reads the entry the reader stands on, or skips it as read before. `entry` gives the entry's
    /// cursor (`nil` if it has none that can be read, which is skipped); it is asked for only when the watch has a
    /// position to compare it with.
    public mutating func reads<Failure: Error>(
        _ watch: WatchName,
        entry: () throws(Failure) -> JournalCursor?
    ) throws(Failure) -> Bool {
        guard var followed = self.watches[watch] else { return false }
        if let skip = followed.skip {
            guard let cursor = try entry(), cursor.isAfter(skip) else { return false }
            followed.skip = nil
            followed.caughtUp = true
        } else if !followed.caughtUp {
            followed.caughtUp = true
        } else {
            return true
        }
        self.watches[watch] = followed
        return true
    }

    /// `watch` matched the entry at `entry`, read at `now`, and made `payload` of it for `recipients`: the batches
    /// to post now. An app whose position is at or after the entry skips it; none while a rewind waits.
    /// - Parameter queue: the watch posts with a queue policy (``WatchBatcher/add(_:_:cursor:queue:at:)``).
    public mutating func matched(
        _ watch: WatchName,
        entry: JournalCursor,
        _ payload: Entry,
        for recipients: [AppName],
        queue: Bool,
        at now: Instant
    ) -> [Action] {
        guard !self.rewindWanted, var followed = self.watches[watch] else { return [] }
        followed.matched = entry
        var actions: [Action] = []
        for app in recipients {
            if let skip = followed.appSkips[app] {
                guard entry.isAfter(skip) else { continue }
                followed.appSkips[app] = nil
            }
            let key = Batcher.Key(watch: watch, app: app)
            actions += self.batcher.add(key, payload, cursor: entry, queue: queue, at: now).map(Action.post)
        }
        self.watches[watch] = followed
        return actions
    }

    /// The reader finished a pass on the entry at `cursor`.
    public mutating func passEnded(at cursor: JournalCursor) {
        self.position = cursor
    }

    // MARK: Posts

    /// The batches whose window has ended by `now`; none while a rewind waits (it forgets them).
    public mutating func due(at now: Instant) -> [Action] {
        guard !self.rewindWanted else { return [] }
        return self.batcher.due(at: now).map(Action.post)
    }

    /// `batch` was posted and taken: it is in flight until ``answered(_:writeFailed:)``.
    public mutating func posted(_ batch: Batch) {
        let watch = batch.key.watch
        self.inFlight[watch, default: 0] += 1
        self.watches[watch]?.posted[batch.key.app] = batch.cursor
    }

    /// A post of `watch` was answered, whatever became of the watch since. `writeFailed`: the write it went into
    /// failed, and its position with it, so the reader reads again from the positions on disk (``rewindIfDue()``).
    public mutating func answered(_ watch: WatchName, writeFailed: Bool) {
        if let count = self.inFlight[watch] { self.inFlight[watch] = count > 1 ? count - 1 : nil }
        if writeFailed { self.rewindWanted = true }
    }

    /// The idle writes due at `now`: each watch with nothing in flight, nothing folding and nothing to skip writes
    /// the reader's position as its own. (A watch that posts all the time keeps its per-app positions, written
    /// with its posts.)
    public mutating func idle(at now: Instant) -> [Action] {
        guard self.lastIdleWrite.duration(to: now) >= Self.idleWriteInterval, let position = self.position,
            !self.rewindWanted
        else { return [] }
        self.lastIdleWrite = now
        var actions: [Action] = []
        for name in self.order {
            guard let watch = self.watches[name], self.inFlight[name] == nil, watch.skip == nil,
                !self.batcher.hasPending(name), watch.written?.text != position.text
            else { continue }
            actions.append(.writePosition(name, position))
            self.watches[name]?.written = position
        }
        return actions
    }
}
