import CoalesceCore
import CoalesceStore
import Foundation
import Logging
import Synchronization
import Systemd
import Varlink

/// Reads the journal for every watch (DESIGN.md §5): one sd-journal reader on a thread of its own
/// (`coalesced-journal`), its matches the union of the watches', each entry then tested against each watch;
/// matched entries go through the flood bound (``WatchBatcher``) and are posted to the watch's apps, each post
/// carrying the watch's position into the very write that stores it.
///
/// Exactly once: which entries each watch and each app skip, where reading resumes, when it reads again and when
/// a watch writes its own position are decided by ``WatchPositions``; this carries its actions out on sd-journal
/// and the store. A seek resumes with seek + next + test (the entry at the position is skipped only when it is the
/// one named).
final class JournalFollower: @unchecked Sendable {
    /// What Stats and ListWatches show of one watch.
    struct WatchFigures: Sendable {
        var matched = 0
        var posts = 0
        var refused = 0
        /// Entries it selected whose message its pattern could not test within the matcher's limits.
        var untested = 0
        /// The wall-clock time (s since the epoch) of the last entry it matched.
        var lastMatched: Double?
    }

    /// What Stats shows of the reader.
    struct ReaderFigures: Sendable {
        var running = false
        var reason: String?
        var entriesRead = 0
        /// How far behind the journal the reader is: the age of the last entry read while more wait; 0 when it
        /// has read all.
        var lagSeconds = 0.0
        var rewinds = 0
    }

    enum Command {
        case watches([ConfiguredWatch], starts: [WatchName: WatchStart])
    }

    struct Shared {
        var commands: [Command] = []
        var stopping = false
        /// Posts answered since the thread last looked: by watch, whether each was kept.
        var answered: [(WatchName, Outcome)] = []
        var figures: [WatchName: WatchFigures] = [:]
        var reader = ReaderFigures()
    }

    enum Outcome {
        case kept
        case refused
        case failed
    }

    /// One watch as the thread follows it.
    struct Followed {
        var configured: ConfiguredWatch
        var matcher: MessageMatcher?
        var poster: VarlinkPeer
        /// When an untested entry was last said in the log, and how many were left untested since.
        var untestedSaid: ContinuousClock.Instant?
        var untestedSinceSaid = 0

        var watch: JournalWatch { self.configured.watch }
    }

    typealias Positions = WatchPositions<ContinuousClock.Instant, JSONObject>

    static let threadName = "coalesced-journal"
    /// Entries read in one pass before the thread posts what is due and looks at its commands.
    static let passSize = 1000

    let apps: AppManager
    let store: Store
    let logger: Logger
    let shared = Mutex(Shared())
    let wakeup: Wakeup
    let interval: Duration
    let burst: Int
    let threadRuns = Mutex(false)
    let ended = DispatchSemaphore(value: 0)

    // The thread's own, touched by nothing else.
    var followed: [WatchName: Followed] = [:]
    var positions: Positions
    var reader: JournalReader?
    /// The reader stands on an entry not yet read for the watches (after a seek whose position was gone).
    var standsOnUnread = false
    var recipients: [WatchName: [AppName]] = [:]
    /// What the watches matched in the pass under way, added to the shared figures at its end (one lock a pass).
    var passFigures: [WatchName: WatchFigures] = [:]

    init(apps: AppManager, store: Store, settings: JournalSettings, logger: Logger) throws(SystemdError) {
        self.apps = apps
        self.store = store
        self.logger = logger
        self.wakeup = try Wakeup()
        self.interval = settings.interval
        self.burst = settings.queueBurst
        self.positions = Positions(interval: settings.interval, burst: settings.queueBurst, now: .now)
    }

    // MARK: The interface to other threads

    /// Starts the thread, following `watches` (their positions from the store, a new one's from the journal's
    /// tail).
    func start(_ watches: [ConfiguredWatch], starts: [WatchName: WatchStart] = [:]) {
        self.shared.withLock { $0.commands.append(.watches(watches, starts: starts)) }
        let thread = Thread { [self] in
            Systemd.nameThisThread(Self.threadName)
            self.run()
            self.ended.signal()
        }
        thread.name = Self.threadName
        self.threadRuns.withLock { $0 = true }
        thread.start()
    }

    /// Stops the thread and waits for it; posts it made are answered by the store as usual. Entries folded and not
    /// yet posted are read again by the next start.
    func stop() {
        guard self.threadRuns.withLock({ runs in defer { runs = false }; return runs }) else { return }
        self.shared.withLock { $0.stopping = true }
        self.wakeup.set()
        self.ended.wait()
    }

    /// Follows `watches` from now on; one without a stored position starts where `starts` says (the tail by
    /// default).
    func follow(_ watches: [ConfiguredWatch], starts: [WatchName: WatchStart] = [:]) {
        self.shared.withLock { $0.commands.append(.watches(watches, starts: starts)) }
        self.wakeup.set()
    }

    var figures: (reader: ReaderFigures, watches: [WatchName: WatchFigures]) {
        self.shared.withLock { ($0.reader, $0.figures) }
    }

    // MARK: The thread

    /// Opens the journal the first time there is a watch to read it for (a daemon without watches holds no
    /// journal files and no inotify instance); `nil`, said once in the log and in Stats, if it cannot.
    func openReader() -> JournalReader? {
        if let reader = self.reader { return reader }
        do {
            let reader = try JournalReader()
            _ = try reader.descriptor()  // sd-journal watches its files from now on
            self.reader = reader
            self.shared.withLock {
                $0.reader.running = true
                $0.reader.reason = nil
            }
            return reader
        } catch {
            let first = self.shared.withLock { shared in
                defer { shared.reader.reason = "\(error)" }
                return shared.reader.reason != "\(error)"
            }
            if first { self.logger.error("Cannot read the journal: \(error); journal watches post nothing", metadata: ["reason": "\(error)"]) }
            return nil
        }
    }

    func run() {
        self.shared.withLock { $0.reader.reason = "no watches" }
        while true {
            let (commands, answered, stopping) = self.shared.withLock { shared in
                defer {
                    shared.commands.removeAll()
                    shared.answered.removeAll()
                }
                return (shared.commands, shared.answered, shared.stopping)
            }
            if stopping { return }
            self.wakeup.clear()
            for (watch, outcome) in answered { self.answered(watch, outcome) }
            for case .watches(let watches, let starts) in commands { self.change(to: watches, starts: starts) }
            if self.reader != nil, let watches = self.positions.rewindIfDue() { self.rewind(watches) }
            guard self.reader != nil else {
                // Nothing to read for yet (no watch, or the journal cannot be opened): the next command wakes it.
                self.pause(.seconds(3600))
                continue
            }
            let more = self.pass()
            self.postDue()
            self.writeIdlePositions()
            guard !more else { continue }
            let now = ContinuousClock.now
            var timeout = Duration.seconds(1)
            if let due = self.positions.nextDue { timeout = min(timeout, max(.zero, now.duration(to: due))) }
            do {
                _ = try self.reader?.wait(timeout: timeout, wake: self.wakeup.descriptor)
            } catch {
                self.readFailed(error)
            }
        }
    }

    /// Reads up to a pass of entries; true when more may be waiting.
    func pass() -> Bool {
        guard let reader = self.reader, !self.followed.isEmpty else { return false }
        self.recipients = self.followed.mapValues { self.apps.journalRecipients($0.watch.target, poster: $0.poster) }
        var read = 0
        var more = false
        do {
            while read < Self.passSize {
                if self.standsOnUnread {
                    self.standsOnUnread = false
                } else {
                    guard try reader.next() else { break }
                }
                read += 1
                try self.evaluate(reader)
            }
            more = read == Self.passSize
            self.addPassFigures()
            if read > 0, let cursor = JournalCursor(try reader.cursor()) {
                self.positions.passEnded(at: cursor)
                let age = more ? max(0, Date().timeIntervalSince1970 - Double(cursor.realtime) / 1e6) : 0
                self.shared.withLock {
                    $0.reader.entriesRead += read
                    $0.reader.lagSeconds = age
                }
            } else if read == 0 {
                self.shared.withLock { $0.reader.lagSeconds = 0 }
            }
        } catch {
            self.addPassFigures()
            self.readFailed(error)
        }
        return more
    }

    func addPassFigures() {
        guard !self.passFigures.isEmpty else { return }
        let figures = self.passFigures
        self.passFigures = [:]
        self.shared.withLock { shared in
            for (name, pass) in figures {
                shared.figures[name, default: WatchFigures()].matched += pass.matched
                shared.figures[name, default: WatchFigures()].untested += pass.untested
                if let last = pass.lastMatched { shared.figures[name, default: WatchFigures()].lastMatched = last }
            }
        }
    }

    /// Tests the entry the reader stands on against each watch, and hands what matched to the batcher.
    func evaluate(_ reader: JournalReader) throws(SystemdError) {
        var fields: [String: String?] = [:]
        func field(_ name: String) -> String? {
            if let known = fields[name] { return known }
            let value = try? reader.field(name)
            fields[name] = .some(value)
            return value
        }
        var cursor: JournalCursor?
        func current() throws(SystemdError) -> JournalCursor? {
            if cursor == nil { cursor = JournalCursor(try reader.cursor()) }
            return cursor
        }
        var realtime: UInt64?
        // Watches with the same fields share the payload they make of the entry.
        var payloads: [[String]: JSONObject] = [:]
        let now = ContinuousClock.now
        for name in self.positions.order {
            guard let followed = self.followed[name], try self.positions.reads(name, entry: current) else { continue }
            guard followed.watch.selection.admits(field) else { continue }
            if let matcher = followed.matcher {
                guard let message = field("MESSAGE") else { continue }
                switch matcher.test(message) {
                case .matches: break
                case .doesNotMatch: continue
                case .untested(let reason):
                    self.untested(name, reason: reason, at: now)
                    continue
                }
            }
            guard let entry = try current() else { continue }
            let time: UInt64
            if let known = realtime {
                time = known
            } else {
                time = try reader.realtimeMicroseconds()
            }
            realtime = time
            self.passFigures[name, default: WatchFigures()].matched += 1
            self.passFigures[name, default: WatchFigures()].lastMatched = Double(time) / 1e6
            let payload: JSONObject
            if let made = payloads[followed.watch.fields] {
                payload = made
            } else {
                var made: JSONObject = [:]
                for name in followed.watch.fields {
                    let value: String?
                    switch name {
                    case "__CURSOR": value = entry.text
                    case "__REALTIME_TIMESTAMP": value = String(time)
                    case "__MONOTONIC_TIMESTAMP": value = String(entry.monotonic)
                    default: value = field(name)
                    }
                    if let value { made[name] = .string(Self.bounded(value)) }
                }
                payloads[followed.watch.fields] = made
                payload = made
            }
            let queue: Bool
            if case .queue = followed.watch.policy { queue = true } else { queue = false }
            let recipients = self.recipients[name] ?? []
            self.carryOut(self.positions.matched(name, entry: entry, payload, for: recipients, queue: queue, at: now))
        }
    }

    /// An entry `name` selected whose message its pattern could not test: counted, and said in the log the first
    /// time and then at most once a minute, with how many since.
    func untested(_ name: WatchName, reason: String, at now: ContinuousClock.Instant) {
        self.passFigures[name, default: WatchFigures()].untested += 1
        guard var followed = self.followed[name] else { return }
        followed.untestedSinceSaid += 1
        if let said = followed.untestedSaid, now - said < .seconds(60) {
            self.followed[name] = followed
            return
        }
        self.logger.warning(
            "Journal watch \(name): \(followed.untestedSinceSaid) entries could not be tested against its pattern (\(reason)) and were not posted",
            metadata: [
                "message_id": "\(MessageID.journalEntryUntested)", "watch": "\(name)", "reason": "\(reason)",
                "untested": "\(followed.untestedSinceSaid)",
            ]
        )
        followed.untestedSaid = now
        followed.untestedSinceSaid = 0
        self.followed[name] = followed
    }

    /// A field's value as an event carries it: at most ``JournalWatch/maximumFieldBytes`` bytes, cut at a
    /// character.
    static func bounded(_ value: String) -> String {
        guard value.utf8.count > JournalWatch.maximumFieldBytes else { return value }
        var end = value.utf8.index(value.utf8.startIndex, offsetBy: JournalWatch.maximumFieldBytes)
        while end > value.startIndex, !value.unicodeScalars.indices.contains(end) { end = value.utf8.index(before: end) }
        return String(value[..<end])
    }

    func postDue() {
        self.carryOut(self.positions.due(at: .now))
    }

    /// Carries out what ``WatchPositions`` decided, in order.
    func carryOut(_ actions: [Positions.Action]) {
        for action in actions {
            switch action {
            case .post(let batch):
                self.post(batch)
            case .writePosition(let watch, let cursor):
                self.store.setJournalPosition(watch: watch.value, cursor: cursor.text)
            case .seekHead:
                if let reader = self.reader { self.seek(after: nil, in: reader) }
            case .seek(let cursor):
                if let reader = self.reader { self.seek(after: cursor, in: reader) }
            }
        }
    }

    func post(_ batch: Positions.Batch) {
        guard let followed = self.followed[batch.key.watch] else { return }
        var payload = batch.last
        payload["watch"] = .string(batch.key.watch.value)
        payload["entries"] = .int(Int64(batch.entries))
        let queue: Bool
        if case .queue = followed.watch.policy { queue = true } else { queue = false }
        let watch = batch.key.watch
        let posted = self.apps.postJournal(
            batch.key.app,
            kind: followed.watch.kind,
            payload: .object(payload),
            policy: followed.watch.policy,
            weight: queue ? 1 : batch.entries,
            poster: followed.configured.owner,
            mark: JournalMark(watch: watch, cursor: batch.cursor.text)
        ) { [self] _, failure in
            let outcome: Outcome
            switch failure {
            case nil: outcome = .kept
            case is PostRefusal: outcome = .refused
            default: outcome = .failed
            }
            self.shared.withLock { $0.answered.append((watch, outcome)) }
            self.wakeup.set()
        }
        guard posted else { return }  // the app went: the next pass finds who receives now
        self.positions.posted(batch)
        self.shared.withLock { $0.figures[watch, default: WatchFigures()].posts += 1 }
    }

    func answered(_ watch: WatchName, _ outcome: Outcome) {
        // A failed write kept neither the post nor its position: the positions read it again.
        self.positions.answered(watch, writeFailed: outcome == .failed)
        if outcome == .refused {
            self.shared.withLock { $0.figures[watch, default: WatchFigures()].refused += 1 }
        }
    }

    /// The watches' own positions the idle ones write now (at most once a second).
    func writeIdlePositions() {
        self.carryOut(self.positions.idle(at: .now))
    }

    /// Waits `duration`, or until another thread wakes the thread (a stop, a command).
    func pause(_ duration: Duration) {
        self.wakeup.wait(for: duration)
    }

    /// The newest entry's cursor, leaving the reader where the next seek puts it.
    static func tail(of reader: JournalReader) -> JournalCursor? {
        try? reader.seekTail()
        guard (try? reader.previous()) == true, let text = try? reader.cursor() else { return nil }
        return JournalCursor(text)
    }

    /// The cursor of the last entry written before `microseconds`, or `nil` if none was.
    static func entryBefore(_ microseconds: UInt64, in reader: JournalReader) -> JournalCursor? {
        try? reader.seek(realtimeMicroseconds: microseconds)
        guard (try? reader.previous()) == true, let text = try? reader.cursor() else { return nil }
        return JournalCursor(text)
    }

    /// The watch's owner as a poster: its groups looked up, for apps whose posters rules name groups.
    static func peer(_ uid: UInt32) -> VarlinkPeer {
        guard uid != 0, let groups = QuotaLedger.groups(of: uid) else { return VarlinkPeer(pid: 0, uid: uid, gid: 0, groups: []) }
        return VarlinkPeer(pid: 0, uid: uid, gid: groups.primary, groups: groups.all)
    }
}
