import CoalesceCore

extension WatchPositionsTests {
    /// The journal, the store and the follower's loop, as `JournalFollower` carries the machine's actions out.
    struct Rig {
        /// The entries the journal keeps, in order (a gap is an entry vacuumed).
        var journal: [Int] = []
        var definitions: [JournalWatch]
        /// By watch, the entries it matches, and the apps it posts to.
        var matches: [WatchName: (Int) -> Bool] = [:]
        var recipients: [WatchName: [AppName]] = [:]
        var starts: [WatchName: WatchStart] = [:]
        var interval: Duration = .zero
        var now = TestInstant.zero
        var machine: Positions
        /// Where the reader reads next, as an index into `journal`.
        var next = 0
        /// The store: each watch's own position, and by app the one its last kept post carried.
        var own: [WatchName: Int] = [:]
        var apps: [WatchName: [AppName: Int]] = [:]
        /// Posts handed to the apps and not answered, in order.
        var inFlight: [Positions.Batch] = []
        /// What each app received of each watch: `entries×last` per post kept.
        var received: [String: [String]] = [:]
        /// Every entry the reader read, in order, and the seeks it made.
        var read: [Int] = []
        var seeks: [String] = []
        var rewinds = 0

        init(_ watches: [WatchName], to recipients: [AppName] = [monitor], interval: Duration = .zero) {
            self.definitions = watches.map { WatchPositionsTests.watch($0) }
            for watch in watches {
                self.matches[watch] = { _ in true }
                self.recipients[watch] = recipients
            }
            self.interval = interval
            self.machine = Positions(interval: interval, burst: 1, now: .zero)
        }

        var stored: [WatchName: Positions.Stored] {
            var stored: [WatchName: Positions.Stored] = [:]
            for watch in Set(self.own.keys).union(self.apps.keys) {
                stored[watch] = Positions.Stored(
                    own: self.own[watch].map(WatchPositionsTests.cursor),
                    apps: (self.apps[watch] ?? [:]).mapValues(WatchPositionsTests.cursor)
                )
            }
            return stored
        }

        /// Follows `definitions` (at start, or after a change), with what the store holds.
        mutating func follow(starts: [WatchName: WatchStart]? = nil) {
            let journal = self.journal
            let actions = self.machine.change(
                to: self.definitions,
                stored: self.stored,
                starts: starts ?? self.starts,
                tail: { journal.last.map(WatchPositionsTests.cursor) },
                entryBefore: { time in journal.last(where: { $0 < Int(time) }).map(WatchPositionsTests.cursor) }
            )
            self.carryOut(actions)
        }

        mutating func carryOut(_ actions: [Positions.Action]) {
            for action in actions {
                switch action {
                case .post(let batch):
                    self.inFlight.append(batch)
                    self.machine.posted(batch)
                case .writePosition(let watch, let cursor):
                    self.own[watch] = Int(cursor.sequenceNumber)
                case .seekHead:
                    self.next = 0
                    self.seeks.append("head")
                case .seek(let cursor):
                    // On the entry named, or the closest after it if it is gone: the next read is past it.
                    self.next = self.journal.firstIndex { $0 > Int(cursor.sequenceNumber) } ?? self.journal.count
                    self.seeks.append("after \(cursor.sequenceNumber)")
                }
            }
        }

        mutating func write(_ entries: ClosedRange<Int>) { self.journal += entries }

        /// One pass of the reader over what it has not read. With `failingAfter`, reading fails once that many
        /// entries are read: the pass ends nowhere, and the reader seeks where the machine says.
        mutating func pass(failingAfter readable: Int? = nil) {
            guard self.next < self.journal.count else { return }
            let end = readable.map { min(self.next + $0, self.journal.count) } ?? self.journal.count
            for n in self.journal[self.next..<end] {
                self.read.append(n)
                let cursor = WatchPositionsTests.cursor(n)
                for watch in self.machine.order {
                    guard self.machine.reads(watch, entry: { cursor }), self.matches[watch]?(n) ?? false else {
                        continue
                    }
                    let recipients = self.recipients[watch] ?? []
                    let actions = self.machine.matched(
                        watch, entry: cursor, n, for: recipients, queue: false, at: self.now
                    )
                    self.carryOut(actions)
                }
            }
            self.next = end
            guard readable == nil else { return self.carryOut(self.machine.readFailed()) }
            self.machine.passEnded(at: WatchPositionsTests.cursor(self.journal[self.journal.count - 1]))
        }

        /// Answers the posts in flight that `which` picks: the write kept (the post and its position on disk
        /// together), or failed (neither); then a rewind if one is due, as the follower's next turn does.
        mutating func answer(failing: Bool = false, where which: (Positions.Batch) -> Bool = { _ in true }) {
            let answering = self.inFlight.filter(which)
            self.inFlight = self.inFlight.filter { !which($0) }
            for batch in answering {
                if !failing {
                    self.apps[batch.key.watch, default: [:]][batch.key.app] = Int(batch.cursor.sequenceNumber)
                    let name = WatchPositionsTests.named(batch.key)
                    self.received[name, default: []].append("\(batch.entries)×\(batch.last)")
                }
                self.machine.answered(batch.key.watch, writeFailed: failing)
            }
            if let watches = self.machine.rewindIfDue() {
                self.rewinds += 1
                self.definitions = self.definitions.filter { watches.contains($0.name) }
                self.follow(starts: self.machine.starts)
            }
        }

        /// Time goes on: batches due are posted, idle positions written.
        mutating func tick(to milliseconds: Int) {
            self.now = WatchPositionsTests.at(milliseconds)
            self.carryOut(self.machine.due(at: self.now))
            self.carryOut(self.machine.idle(at: self.now))
        }

        /// `kill -9`: what is in flight is lost with its writes, and a new daemon follows the watches from the store.
        mutating func restart() {
            self.inFlight = []
            self.machine = Positions(interval: self.interval, burst: 1, now: self.now)
            self.next = 0
            self.read = []
            self.seeks = []
            self.follow()
        }
    }
}
