import HeapModule

/// The pending notification requests of every app, as a pure state machine: requests, fires and clock events go
/// in with the time (``ClockReading``: the wall clock and the boot-time clock), and what to store, present, log
/// and arm comes out as values (``AlertAction``). It knows no clock, timer, zone file or disk.
///
/// The rules, each decided here and nowhere else:
/// - The rule is kept, never only a date: a request's next date is worked out again after each fire, clock
///   change, time-zone change and start (``AlertRecord`` is what the store keeps).
/// - `at` and calendar dates are on the wall clock; `after` intervals on the boot-time clock, so time asleep
///   counts, and a clock set forward or back moves no interval. Across a restart of the daemon an interval runs
///   on the wall clock (``AlertRecord/intervalDue``).
/// - A repeating calendar rule's next date is the first after its last fire: a clock set back fires no date
///   twice; one that has not fired yet counts its dates from the time the clock was set back to.
/// - Floating calendar rules follow the machine's zone (``timeZoneChanged(to:now:)``); zoned ones keep theirs.
/// - Every input handles the fires due by then, in date order. A fire handled more than
///   ``AlertConfiguration/lateAfter`` after its date was missed, and its request's ``LatePolicy`` applies.
/// - An app has at most ``AlertConfiguration/pendingLimit`` requests; one more is refused, never dropped.
public struct AlertScheduler: Sendable {
    public var configuration: AlertConfiguration
    /// The machine's zone, which floating calendar rules are read in.
    public private(set) var localZone: ZoneRules

    /// When a pending request fires next.
    enum Next: Sendable, Hashable {
        case wall(WallTime)
        case boot(BootTime)
    }

    struct Entry: Sendable {
        var record: AlertRecord
        var next: Next
    }

    /// Every pending request; changed only through ``set(_:_:)``, which keeps the indexes below.
    private(set) var entries: [AlertKey: Entry] = [:]
    /// The next dates, soonest first, so that an input looks only at the requests due and the timers are read
    /// without visiting every request. An entry whose request is gone or moved is skipped when it comes up.
    private var wallDates = Heap<Dated<WallTime>>()
    private var bootDates = Heap<Dated<BootTime>>()
    /// How many requests each app has pending.
    private var counts: [AppName: Int] = [:]

    struct Dated<Date: Comparable & Sendable>: Comparable, Sendable {
        var date: Date
        var key: AlertKey
        static func < (lhs: Dated, rhs: Dated) -> Bool { (lhs.date, lhs.key) < (rhs.date, rhs.key) }
    }

    public init(configuration: AlertConfiguration = AlertConfiguration(), localZone: ZoneRules) {
        self.configuration = configuration
        self.localZone = localZone
    }

    /// What the store must hold: one record per pending request, by key.
    public var records: [AlertRecord] { self.entries.keys.sorted().map { self.entries[$0]!.record } }

    /// How many requests `app` has pending.
    public func pendingCount(of app: AppName) -> Int { self.counts[app] ?? 0 }

    /// When the app's request of this id fires next, on the wall clock; `nil` when it is not pending.
    public func next(of key: AlertKey, now: ClockReading) -> WallTime? {
        self.entries[key].map { Self.wallDate(of: $0.next, now: now) }
    }

    /// Puts a request's entry in place (or removes it, with `nil`), keeping the indexes.
    /// - Parameter reindexing: index its date even when it did not move (its index entry was taken out as due).
    mutating func set(_ key: AlertKey, _ entry: Entry?, reindexing: Bool = false) {
        let old: Entry?
        if let entry { old = self.entries.updateValue(entry, forKey: key) } else { old = self.entries.removeValue(forKey: key) }
        switch (old, entry) {
        case (nil, _?): self.counts[key.app, default: 0] += 1
        case (_?, nil):
            let left = self.counts[key.app, default: 1] - 1
            self.counts[key.app] = left == 0 ? nil : left
        default: break
        }
        guard let entry, reindexing || entry.next != old?.next else { return }
        switch entry.next {
        case .wall(let date): self.wallDates.insert(Dated(date: date, key: key))
        case .boot(let date): self.bootDates.insert(Dated(date: date, key: key))
        }
        // Entries left by moved and removed requests are dropped as they come up; past twice the requests, all at once.
        if self.wallDates.count + self.bootDates.count > 2 * self.entries.count + 64 { self.reindex() }
    }

    /// Builds the indexes again from the entries.
    private mutating func reindex() {
        var wall: [Dated<WallTime>] = []
        var boot: [Dated<BootTime>] = []
        for (key, entry) in self.entries {
            switch entry.next {
            case .wall(let date): wall.append(Dated(date: date, key: key))
            case .boot(let date): boot.append(Dated(date: date, key: key))
            }
        }
        self.wallDates = Heap(wall)
        self.bootDates = Heap(boot)
    }

    /// The requests due at `now`, by key; the indexes' entries for them, and those left by moved or removed
    /// requests before the first not due, are taken out.
    mutating func takeDue(now: ClockReading) -> [AlertKey] {
        var due: Set<AlertKey> = []
        while let top = self.wallDates.min, top.date <= now.wall {
            self.wallDates.removeMin()
            if self.entries[top.key]?.next == .wall(top.date) { due.insert(top.key) }
        }
        while let top = self.bootDates.min, top.date <= now.boot {
            self.bootDates.removeMin()
            if self.entries[top.key]?.next == .boot(top.date) { due.insert(top.key) }
        }
        self.dropStaleTops()
        return due.sorted()
    }

    /// Takes out the indexes' first entries while they stand for requests gone or moved, so that their minima are
    /// the timers' dates.
    mutating func dropStaleTops() {
        while let top = self.wallDates.min, self.entries[top.key]?.next != .wall(top.date) { self.wallDates.removeMin() }
        while let top = self.bootDates.min, self.entries[top.key]?.next != .boot(top.date) { self.bootDates.removeMin() }
    }

    /// The app's pending requests with their next dates, soonest first.
    public func pending(of app: AppName, now: ClockReading) -> [PendingAlert] {
        self.entries.values.filter { $0.record.key.app == app }
            .map { PendingAlert(request: $0.record.request, next: Self.wallDate(of: $0.next, now: now), lastFire: $0.record.lastFire) }
            .sorted { ($0.next, $0.request.id) < ($1.next, $1.request.id) }
    }

    /// Starts with the records the store kept, and handles what came due while the daemon was down.
    public mutating func started(restoring records: [AlertRecord], now: ClockReading) -> [AlertAction] {
        self.entries = [:]
        self.counts = [:]
        self.wallDates = Heap()
        self.bootDates = Heap()
        var changed: Set<AlertKey> = []
        for record in records {
            if let next = self.next(of: record, now: now) {
                self.set(record.key, Entry(record: record, next: next))
            } else {
                changed.insert(record.key)
            }
        }
        return self.finish(now: now, changed: changed)
    }

    /// Schedules `request` for `app`, replacing whole a pending request of the same id.
    /// - Throws: ``AlertError``, and then nothing changed: the request is not valid, its calendar rule matches no
    ///   date to come, or the app has as many requests pending as it may.
    public mutating func schedule(_ request: AlertRequest, for app: AppName, now: ClockReading) throws(AlertError) -> [AlertAction] {
        try request.validate()
        let key = AlertKey(app: app, id: request.id)
        if self.entries[key] == nil {
            let pending = self.pendingCount(of: app)
            guard pending < self.configuration.pendingLimit else {
                throw .pendingLimit(limit: self.configuration.pendingLimit, pending: pending)
            }
        }
        var record = AlertRecord(key: key, request: request, since: now.wall)
        if case .after(let interval, _) = request.trigger { record.intervalDue = now.wall.advanced(by: interval) }
        guard let next = self.next(of: record, now: now) else {
            guard case .calendar(let components, let zone, _) = request.trigger else { preconditionFailure("only a calendar rule can end") }
            throw .neverFires(components, zone: self.zone(of: zone).name)
        }
        self.set(key, Entry(record: record, next: next))
        return self.finish(now: now, changed: [key])
    }

    /// Removes the app's requests of these ids; ids not pending are passed over.
    public mutating func cancel(_ ids: [String], of app: AppName, now: ClockReading) -> [AlertAction] {
        var changed: Set<AlertKey> = []
        for id in ids {
            let key = AlertKey(app: app, id: id)
            if self.entries[key] != nil {
                self.set(key, nil)
                changed.insert(key)
            }
        }
        return self.finish(now: now, changed: changed)
    }

    /// Removes all the app's requests.
    public mutating func cancelAll(of app: AppName, now: ClockReading) -> [AlertAction] {
        let keys = Set(self.entries.keys.filter { $0.app == app })
        for key in keys { self.set(key, nil) }
        return self.finish(now: now, changed: keys)
    }

    /// A timer armed by ``AlertAction/arm(wall:boot:)`` expired (or the shell checks early: nothing not due fires).
    public mutating func fired(now: ClockReading) -> [AlertAction] { self.finish(now: now, changed: []) }

    /// The machine woke from sleep: what came due meanwhile is handled, missed fires by their late policy.
    public mutating func resumed(now: ClockReading) -> [AlertAction] { self.finish(now: now, changed: []) }

    /// The wall clock was set (forward or back). Intervals keep their boot-time dates, their wall dates move;
    /// calendar dates are worked out again; what the clock passed over is handled as missed.
    public mutating func clockChanged(now: ClockReading) -> [AlertAction] {
        var changed: Set<AlertKey> = []
        for key in self.entries.keys {
            var entry = self.entries[key]!
            switch (entry.record.request.trigger, entry.next) {
            case (.after, .boot(let due)):
                entry.record.intervalDue = now.wall.advanced(by: now.boot.duration(to: due))
            case (.calendar, _):
                if entry.record.lastFire == nil, now.wall < entry.record.since { entry.record.since = now.wall }
                guard let next = self.next(of: entry.record, now: now) else {
                    self.set(key, nil)
                    changed.insert(key)
                    continue
                }
                entry.next = next
            default:
                continue
            }
            if entry.record != self.entries[key]!.record { changed.insert(key) }
            self.set(key, entry)
        }
        return self.finish(now: now, changed: changed)
    }

    /// The machine's zone changed: floating calendar rules are worked out again in it.
    public mutating func timeZoneChanged(to zone: ZoneRules, now: ClockReading) -> [AlertAction] {
        self.localZone = zone
        var changed: Set<AlertKey> = []
        for key in self.entries.keys {
            guard case .calendar(_, .floating, _) = self.entries[key]!.record.request.trigger else { continue }
            var entry = self.entries[key]!
            if let next = self.next(of: entry.record, now: now) {
                entry.next = next
                self.set(key, entry)
            } else {
                self.set(key, nil)
                changed.insert(key)
            }
        }
        return self.finish(now: now, changed: changed)
    }

    /// The timers to arm: the earliest wall-clock date and the earliest boot-time date (as every input leaves the
    /// indexes: their first entries stand for pending requests).
    public var timers: (wall: WallTime?, boot: BootTime?) {
        (self.wallDates.min?.date, self.bootDates.min?.date)
    }

    func zone(of zone: CalendarZone) -> ZoneRules {
        switch zone {
        case .floating: return self.localZone
        case .zoned(let rules): return rules
        }
    }

    /// The record's next date; `nil` when it fires no more.
    func next(of record: AlertRecord, now: ClockReading) -> Next? {
        switch record.request.trigger {
        case .now:
            return record.fires == 0 ? .wall(record.since) : nil
        case .at(let date):
            return record.fires == 0 ? .wall(date) : nil
        case .after(_, let repeats):
            guard record.fires == 0 || repeats, let due = record.intervalDue else { return nil }
            return .boot(now.boot.advanced(by: now.wall.duration(to: due)))
        case .calendar(let components, let zone, let repeats):
            guard record.fires == 0 || repeats else { return nil }
            return components.next(after: record.lastFire ?? record.since, in: self.zone(of: zone)).map(Next.wall)
        }
    }

    static func wallDate(of next: Next, now: ClockReading) -> WallTime {
        switch next {
        case .wall(let date): return date
        case .boot(let date): return now.wall.advanced(by: now.boot.duration(to: date))
        }
    }
}
