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
/// Exactly once: an entry is skipped for an app when the watch's position for that app (written with its posts)
/// is at or after it, and for the watch when the watch's own position (written once every entry before it is
/// posted) is. So whatever was read again after a crash, a refused write or a change of watches is posted to each
/// app once. Positions are compared as sd-journal orders entries (``JournalCursor``); reading resumes at the
/// earliest with seek + next + test (the entry at the position is skipped only when it is the one named).
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
        /// Entries at or before it were read for the watch before (by an earlier run, or before a seek back).
        var skip: JournalCursor?
        /// By app, the position up to which the watch posted to it (written with those posts).
        var appSkips: [AppName: JournalCursor] = [:]
        var inFlight = 0
        /// The watch's own position last written.
        var written: String?
        /// It has read an entry past where it started: it has read everything up to the reader's position (a
        /// watch that has not may be waiting for a seek back to reach its start).
        var caughtUp = false
        /// When an untested entry was last said in the log, and how many were left untested since.
        var untestedSaid: ContinuousClock.Instant?
        var untestedSinceSaid = 0

        var watch: JournalWatch { self.configured.watch }
    }

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
    var order: [WatchName] = []
    var batcher: WatchBatcher<ContinuousClock.Instant, JSONObject>
    var reader: JournalReader?
    /// The cursor of the last entry read.
    var position: JournalCursor?
    /// The reader stands on an entry not yet read for the watches (after a seek whose position was gone).
    var standsOnUnread = false
    var rewindWanted = false
    /// Where the watches without a position start, as last given: a rewind starts them there again.
    var starts: [WatchName: WatchStart] = [:]
    var recipients: [WatchName: [AppName]] = [:]
    /// What the watches matched in the pass under way, added to the shared figures at its end (one lock a pass).
    var passFigures: [WatchName: WatchFigures] = [:]
    var lastIdleWrite = ContinuousClock.now

    init(apps: AppManager, store: Store, settings: JournalSettings, logger: Logger) throws(SystemdError) {
        self.apps = apps
        self.store = store
        self.logger = logger
        self.wakeup = try Wakeup()
        self.interval = settings.interval
        self.burst = settings.queueBurst
        self.batcher = WatchBatcher(interval: settings.interval, burst: settings.queueBurst)
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
            if self.rewindWanted, self.followed.values.allSatisfy({ $0.inFlight == 0 }) { self.rewind() }
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
            if let due = self.batcher.nextDue { timeout = min(timeout, max(.zero, now.duration(to: due))) }
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
                self.position = cursor
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
        for name in self.order {
            guard var followed = self.followed[name] else { continue }
            if let skip = followed.skip {
                guard let entry = try current(), entry.isAfter(skip) else { continue }
                followed.skip = nil
                followed.caughtUp = true
                self.followed[name] = followed
            } else if !followed.caughtUp {
                followed.caughtUp = true
                self.followed[name] = followed
            }
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
            for app in self.recipients[name] ?? [] {
                if let skip = followed.appSkips[app] {
                    guard entry.isAfter(skip) else { continue }
                    self.followed[name]?.appSkips[app] = nil
                }
                let key = WatchBatcher<ContinuousClock.Instant, JSONObject>.Key(watch: name, app: app)
                for batch in self.batcher.add(key, payload, cursor: entry, queue: queue, at: now) { self.post(batch) }
            }
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
        for batch in self.batcher.due(at: .now) { self.post(batch) }
    }

    func post(_ batch: WatchBatcher<ContinuousClock.Instant, JSONObject>.Batch) {
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
        self.followed[watch]?.inFlight += 1
        self.shared.withLock { $0.figures[watch, default: WatchFigures()].posts += 1 }
    }

    func answered(_ watch: WatchName, _ outcome: Outcome) {
        self.followed[watch]?.inFlight -= 1
        switch outcome {
        case .kept: break
        case .refused:
            self.shared.withLock { $0.figures[watch, default: WatchFigures()].refused += 1 }
        case .failed:
            // Not kept, nor its position: read again from the positions on disk once nothing else is in flight.
            self.rewindWanted = true
        }
    }

    /// Once a second, each watch with nothing in flight and nothing folded writes its own position: the last entry
    /// read. (A watch that posts all the time keeps its per-app positions, written with its posts.)
    func writeIdlePositions() {
        let now = ContinuousClock.now
        guard now - self.lastIdleWrite >= .seconds(1), let position = self.position, !self.rewindWanted else { return }
        self.lastIdleWrite = now
        for name in self.order {
            guard let followed = self.followed[name], followed.inFlight == 0, followed.skip == nil,
                !self.batcher.hasPending(name), followed.written != position.text
            else { continue }
            self.store.setJournalPosition(watch: name.value, cursor: position.text)
            self.followed[name]?.written = position.text
        }
    }

    /// Waits `duration`, or until another thread wakes the thread (a stop, a command).
    func pause(_ duration: Duration) {
        var descriptor = pollfd(fd: self.wakeup.descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, Int32(clamping: duration.components.seconds * 1000))
        self.wakeup.clear()
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
