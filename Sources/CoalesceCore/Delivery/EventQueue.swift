// Public: the inlinable post path appends to a queue kind's entries, a Deque, in the caller's module.
public import DequeModule

/// A post the queue refused; nothing was held.
public enum PostRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// A sum needs a number in its field.
    case notANumber(kind: EventKind, field: String)
    /// The app already holds as many kinds as allowed.
    case tooManyKinds(limit: Int)
    /// What the app holds would grow past the quota named (its owner's, or the daemon's in all) of `limit` bytes.
    case overQuota(Quota)

    public var description: String {
        switch self {
        case .notANumber(let kind, let field): return "\(kind) sums member '\(field)', and this payload has no number there"
        case .tooManyKinds(let limit): return "the app already holds events of \(limit) kinds"
        case .overQuota(let quota): return "what the app holds would pass \(quota)"
        }
    }
}

/// A bound on the bytes events take in memory, as the shell names it: a user's quota or the daemon's ceiling.
public struct Quota: Sendable, Hashable, CustomStringConvertible {
    /// The setting that sets it, such as `UserHeldBytes`.
    public var name: String
    public var limit: Int
    /// The user it bounds; `nil` for the daemon's ceiling.
    public var uid: UInt32?

    public init(name: String, limit: Int, uid: UInt32? = nil) {
        self.name = name
        self.limit = limit
        self.uid = uid
    }

    public var description: String {
        "\(self.name)=\(self.limit)" + (self.uid.map { " of uid \($0)" } ?? "")
    }
}

/// One event as the app receives it on waking: a kind and what its posts add up to.
public struct CoalescedEvent<Payload: CoalescablePayload, Stamp: Comparable & Sendable>: Sendable, Equatable {
    public var kind: EventKind
    /// The payload the policy produced; `nil` for count and for an overflow marker.
    public var payload: Payload?
    /// How many posts this event stands for.
    public var count: Int
    public var firstPosted: Stamp
    public var lastPosted: Stamp
    /// For a queue's overflow marker: how many of the oldest posts were dropped. `nil` otherwise.
    public var dropped: Int?

    public init(kind: EventKind, payload: Payload?, count: Int, firstPosted: Stamp, lastPosted: Stamp, dropped: Int? = nil) {
        self.kind = kind
        self.payload = payload
        self.count = count
        self.firstPosted = firstPosted
        self.lastPosted = lastPosted
        self.dropped = dropped
    }
}

/// What one suspended app holds: one slot per kind, in order of each kind's first post, each folding its posts
/// by its policy. Memory grows with the number of kinds, not of posts (queue kinds excepted, up to their bound).
///
/// Pure: times come in as stamps, and nothing is kept but what the policies need.
///
/// While a write with the store is being made, the queue records what each change replaced (``beginChanges()``),
/// so that a write the store refuses is taken back (``takeBackChanges(to:)``) without the queue ever being copied:
/// a queue kind's entries are appended where they lie, whatever their number.
public struct EventQueue<Payload: CoalescablePayload, Stamp: Comparable & Sendable>: Sendable {
    public typealias Event = CoalescedEvent<Payload, Stamp>

    /// What is held for one kind, apart from a queue kind's entries (``entries(of:)``): small, whatever it holds.
    public struct Slot: Sendable {
        public var policy: CoalescingPolicy
        public var count: Int
        public var first: Stamp
        public var last: Stamp
        public var held: Held
        /// The span of recorded changes (``EventQueue/changes``) that already holds what this slot was: a kind
        /// folded many times in one write is recorded once.
        @usableFromInline var recorded = 0

        public init(policy: CoalescingPolicy, count: Int, first: Stamp, last: Stamp, held: Held) {
            self.policy = policy
            self.count = count
            self.first = first
            self.last = last
            self.held = held
        }
    }

    /// What a slot keeps, by policy: a payload (latest, first, merge, netChange), nothing (count), a sum, or, for a
    /// queue, how many of its oldest posts were dropped (its entries are kept apart).
    public enum Held: Sendable {
        case payload(Payload)
        case nothing
        case sum(Double)
        case queue(dropped: Int)
    }

    /// One post a queue kind keeps. `serial` is the post's number among the kind's posts since its slot opened
    /// (its ``Slot/count`` once folded in): what the store keeps the entry under, and drops the oldest by.
    public struct Entry: Sendable {
        public var payload: Payload
        public var posted: Stamp
        public var serial: Int

        @inlinable
        public init(payload: Payload, posted: Stamp, serial: Int) {
            self.payload = payload
            self.posted = posted
            self.serial = serial
        }
    }

    /// The most kinds held at once.
    public let kindLimit: Int
    @usableFromInline var slots: [EventKind: Slot] = [:]
    @usableFromInline var order: [EventKind] = []
    /// Each queue kind's entries, oldest first.
    @usableFromInline var queued: [EventKind: Deque<Entry>] = [:]
    /// The bytes held, by ``bytes(of:)``: kept as posts come, so that a quota is checked without a walk.
    public var bytes: Int { self._bytes }
    @usableFromInline var _bytes = 0
    /// What the changes since ``beginChanges()`` replaced, in order; `nil` when changes are not recorded.
    @usableFromInline var changes: [Change]?
    /// The span of changes now being recorded: each mark starts one. Only the first fold of a kind (other than a
    /// queue) in a span is recorded, which is enough to take the span back.
    @usableFromInline var span = 0

    /// What the queue was before one change, to put it back.
    @usableFromInline
    enum Change: Sendable {
        /// A kind's slot opened.
        case opened(EventKind)
        /// A slot other than a queue's folded a post in; it was this.
        case folded(EventKind, Slot)
        /// A queue kind took an entry (a bound of 0 takes none: that is a fold), dropping these oldest ones; its
        /// slot was this.
        case queued(EventKind, Slot, dropping: [Entry])
        /// Everything held went out.
        case drained(slots: [EventKind: Slot], order: [EventKind], queued: [EventKind: Deque<Entry>], lastDelivered: [EventKind: Payload])
        /// What a netChange kind compares against was this.
        case baseline(EventKind, Payload?)
    }

    /// Where the changes recorded stood: taking back to it undoes what came after.
    public struct ChangeMark: Sendable {
        @usableFromInline var count: Int
        @usableFromInline var bytes: Int

        @inlinable
        init(count: Int, bytes: Int) {
            self.count = count
            self.bytes = bytes
        }
    }

    /// What a slot counts for, beyond its payloads: its kind, stamps and bookkeeping.
    @inlinable public static var slotOverhead: Int { 128 }
    /// What each entry of a queue kind (and each event sent and not acknowledged) counts for beyond its payload.
    @inlinable public static var entryOverhead: Int { 32 }

    /// The bytes a slot counts for, its entries apart.
    @inlinable
    public static func bytes(of slot: Slot) -> Int {
        switch slot.held {
        case .payload(let payload): Self.slotOverhead + payload.size
        case .nothing, .sum, .queue: Self.slotOverhead
        }
    }

    /// The bytes a queue kind's entry counts for.
    @inlinable
    public static func bytes(of entry: Entry) -> Int { Self.entryOverhead + entry.payload.size }

    /// The bytes `kind` counts for: its slot and its entries.
    public func bytes(of kind: EventKind) -> Int {
        guard let slot = self.slots[kind] else { return 0 }
        return Self.bytes(of: slot) + (self.queued[kind] ?? []).reduce(0) { $0 + Self.bytes(of: $1) }
    }

    /// The payload of each netChange kind the app last received: what a wake compares against.
    public private(set) var lastDelivered: [EventKind: Payload] = [:]

    public init(kindLimit: Int = 1024) {
        self.kindLimit = kindLimit
    }

    public var isEmpty: Bool { self.order.isEmpty }
    /// Kinds held, in order of first post.
    public var kinds: [EventKind] { self.order }
    /// Posts held for `kind` so far.
    public func count(of kind: EventKind) -> Int { self.slots[kind]?.count ?? 0 }
    /// The policy `kind` is held under (the one of the post that opened its slot).
    public func policy(of kind: EventKind) -> CoalescingPolicy? { self.slots[kind]?.policy }

    /// What is held for `kind`, to store it.
    public func slot(of kind: EventKind) -> Slot? { self.slots[kind] }
    /// A queue kind's entries, oldest first; none for another kind.
    public func entries(of kind: EventKind) -> [Entry] { Array(self.queued[kind] ?? []) }
    /// The serial of a queue kind's oldest entry kept (one past its last post when it keeps none): the store drops
    /// the entries before it.
    @inlinable
    public func firstKept(of kind: EventKind) -> Int? {
        guard let slot = self.slots[kind], case .queue = slot.held else { return nil }
        return self.queued[kind]?.first?.serial ?? slot.count + 1
    }

    // MARK: What the store kept

    /// Puts back a slot read from the store; slots come back in the order they were first posted.
    public mutating func restore(_ kind: EventKind, _ slot: Slot) {
        var slot = slot
        slot.recorded = 0  // recorded by another queue, if any: not in any span of this one's
        self._bytes += Self.bytes(of: slot)
        if let replaced = self.slots.updateValue(slot, forKey: kind) {
            self._bytes -= Self.bytes(of: replaced)
        } else {
            self.order.append(kind)
        }
    }

    /// Puts back a queue kind's entry read from the store, after its slot; entries come back oldest first.
    public mutating func restore(_ kind: EventKind, _ entry: Entry) {
        guard case .queue = self.slots[kind]?.held else { return }
        self.queued[kind, default: []].append(entry)
        self._bytes += Self.bytes(of: entry)
    }

    /// Sets what a later wake compares a netChange kind against (`nil`: nothing received yet), as restored from
    /// the store or taken back.
    public mutating func setBaseline(_ kind: EventKind, _ payload: Payload?) {
        if self.changes != nil { self.changes!.append(.baseline(kind, self.lastDelivered[kind])) }
        self.lastDelivered[kind] = payload
    }

    // MARK: Changes a write may take back

    /// Records what each change replaces from now on, until ``keepChanges()`` or ``takeBackChanges(to:)``.
    @inlinable
    public mutating func beginChanges() -> ChangeMark {
        if self.changes == nil { self.changes = [] }
        return self.markChanges()
    }

    /// Where the changes recorded stand now; what comes after can be taken back to it.
    @inlinable
    public mutating func markChanges() -> ChangeMark {
        self.span += 1
        return ChangeMark(count: self.changes?.count ?? 0, bytes: self._bytes)
    }

    /// The changes recorded stay, and recording stops.
    @inlinable
    public mutating func keepChanges() { self.changes = nil }

    /// Undoes the changes recorded after `mark`, the last first; recording goes on.
    public mutating func takeBackChanges(to mark: ChangeMark) {
        guard var changes = self.changes else { return }
        self.changes = nil  // what is undone is not recorded again
        while changes.count > mark.count {
            switch changes.removeLast() {
            case .opened(let kind):
                self.slots[kind] = nil
                self.queued[kind] = nil
                if self.order.last == kind { self.order.removeLast() } else { self.order.removeAll { $0 == kind } }
            case .folded(let kind, let slot):
                self.slots[kind] = slot
            case .queued(let kind, let slot, let dropped):
                self.slots[kind] = slot
                self.queued[kind]?.removeLast()
                if !dropped.isEmpty { self.queued[kind, default: []].prepend(contentsOf: dropped) }
            case .drained(let slots, let order, let queued, let lastDelivered):
                self.slots = slots
                self.order = order
                self.queued = queued
                self.lastDelivered = lastDelivered
            case .baseline(let kind, let payload):
                self.lastDelivered[kind] = payload
            }
        }
        self._bytes = mark.bytes
        self.changes = changes
    }

    // MARK: Posts

    /// Holds one post. A kind's slot keeps the policy of the post that opened it: a later post with another
    /// policy is folded into it by the slot's policy, so that what was held is never reinterpreted.
    /// - Parameter weight: how many occurrences the post stands for (a journal watch's batch of entries), counted
    ///   in the event's count; a queue kind keeps each post as one entry whatever its weight.
    /// - Returns: whether the post added an entry to a queue kind (its ``newestEntry(of:)``).
    /// - Throws: ``PostRefusal``; nothing changes then.
    // Inlinable: the daemon calls it for every post it holds, and a generic call across modules would look its
    // types up at run time.
    @inlinable
    @discardableResult
    public mutating func post(
        _ kind: EventKind, _ payload: Payload, policy: CoalescingPolicy, at stamp: Stamp, weight: Int = 1
    ) throws(PostRefusal) -> Bool {
        guard let index = self.slots.index(forKey: kind) else {
            guard self.order.count < self.kindLimit else { throw .tooManyKinds(limit: self.kindLimit) }
            var slot = try Self.open(kind, payload, policy: policy, at: stamp)
            if case .queue = policy {} else { slot.count = weight }
            self._bytes += Self.bytes(of: slot)
            if self.changes != nil {
                self.changes!.append(.opened(kind))
                slot.recorded = self.span  // taking the opening back takes back its folds
            }
            self.slots[kind] = slot
            self.order.append(kind)
            guard case .queue(let bound) = policy, bound > 0 else { return false }
            let entry = Entry(payload: payload, posted: stamp, serial: 1)
            self._bytes += Self.bytes(of: entry)
            self.queued[kind] = [entry]
            return true
        }
        // Folded where it lies: a copy of the slot would retain its payload, and this is the path of every post.
        let folded = try Self.fold(
            &self.slots.values[index], kind, payload, at: stamp, weight: weight, queued: &self.queued, changes: &self.changes,
            span: self.span
        )
        self._bytes += folded.grown
        return folded.appended
    }

    /// The newest entry of a queue kind.
    @inlinable
    public func newestEntry(of kind: EventKind) -> Entry? { self.queued[kind]?.last }

    /// Folds a post into its kind's slot (a queue kind's into its entries, ``enqueue(_:_:_:bound:at:queued:changes:)``),
    /// recording what it replaced while ``changes`` are recorded. Returns by how many bytes the kind grew (or
    /// shrank), and whether a queue kind took an entry.
    @inlinable
    static func fold(
        _ slot: inout Slot,
        _ kind: EventKind,
        _ payload: Payload,
        at stamp: Stamp,
        weight: Int = 1,
        queued: inout [EventKind: Deque<Entry>],
        changes: inout [Change]?,
        span: Int
    ) throws(PostRefusal) -> (grown: Int, appended: Bool) {
        if case .queue(let bound) = slot.policy {
            return Self.enqueue(&slot, kind, payload, bound: bound, at: stamp, queued: &queued, changes: &changes)
        }
        // Taking back a post refused below puts back the slot as it is: no harm in recording it first.
        if changes != nil, slot.recorded != span {
            changes!.append(.folded(kind, slot))
            slot.recorded = span
        }
        var grown = 0
        switch slot.policy {
        case .latest, .netChange:
            if case .payload(let replaced) = slot.held { grown = payload.size - replaced.size }
            slot.held = .payload(payload)
        case .first, .count, .queue: break
        case .sum(let field):
            guard case .sum(let total) = slot.held else { preconditionFailure("a sum slot holds a sum") }  // open() pairs them
            guard let number = payload.number(at: field) else { throw .notANumber(kind: kind, field: field) }
            slot.held = .sum(total + number)
        case .merge:
            guard case .payload(let base) = slot.held else { preconditionFailure("a merge slot holds a payload") }
            let merged = base.merged(with: payload)
            grown = merged.size - base.size
            slot.held = .payload(merged)
        }
        slot.count += weight
        slot.last = max(slot.last, stamp)
        return (grown, false)
    }

    /// Appends a post to a queue kind's entries, where they lie, and drops the oldest past the bound (a bound of 0
    /// keeps none: the post is only counted as dropped).
    @inlinable
    static func enqueue(
        _ slot: inout Slot,
        _ kind: EventKind,
        _ payload: Payload,
        bound: Int,
        at stamp: Stamp,
        queued: inout [EventKind: Deque<Entry>],
        changes: inout [Change]?
    ) -> (grown: Int, appended: Bool) {
        guard case .queue(let dropped) = slot.held else { preconditionFailure("a queue slot holds a queue") }  // open() pairs them
        let before = slot
        defer {
            slot.count += 1
            slot.last = max(slot.last, stamp)
        }
        guard bound > 0 else {
            if changes != nil { changes!.append(.folded(kind, before)) }
            slot.held = .queue(dropped: dropped + 1)
            return (0, false)
        }
        let added = Entry(payload: payload, posted: stamp, serial: slot.count + 1)
        queued[kind, default: []].append(added)
        var grown = Self.bytes(of: added)
        var dropping: [Entry] = []
        let over = queued[kind]!.count - bound
        if over > 0 {
            dropping = Array(queued[kind]!.prefix(over))
            queued[kind]!.removeFirst(over)
            for old in dropping { grown -= Self.bytes(of: old) }
        }
        slot.held = .queue(dropped: dropped + dropping.count)
        if changes != nil { changes!.append(.queued(kind, before, dropping: dropping)) }
        return (grown, true)
    }

    /// Everything held, coalesced: one event per kind in order of first post (a queue kind: each of its events,
    /// then its overflow marker), and the queue is left empty. netChange kinds whose latest payload equals what the
    /// app last received produce nothing.
    public mutating func drain() -> [Event] {
        if self.changes != nil {
            self.changes!.append(.drained(slots: self.slots, order: self.order, queued: self.queued, lastDelivered: self.lastDelivered))
        }
        var events: [Event] = []
        for kind in self.order {
            let slot = self.slots[kind]!  // order and slots hold the same kinds
            switch slot.held {
            case .payload(let payload):
                if slot.policy == .netChange {
                    let unchanged = self.lastDelivered[kind] == payload
                    self.lastDelivered[kind] = payload
                    if unchanged { continue }
                }
                events.append(Event(kind: kind, payload: payload, count: slot.count, firstPosted: slot.first, lastPosted: slot.last))
            case .nothing:
                events.append(Event(kind: kind, payload: nil, count: slot.count, firstPosted: slot.first, lastPosted: slot.last))
            case .sum(let total):
                guard case .sum(let field) = slot.policy else { continue }
                events.append(
                    Event(kind: kind, payload: .sum(total, at: field), count: slot.count, firstPosted: slot.first, lastPosted: slot.last)
                )
            case .queue(let dropped):
                for entry in self.queued[kind] ?? [] {
                    events.append(Event(kind: kind, payload: entry.payload, count: 1, firstPosted: entry.posted, lastPosted: entry.posted))
                }
                if dropped > 0 {
                    events.append(
                        Event(kind: kind, payload: nil, count: dropped, firstPosted: slot.first, lastPosted: slot.last, dropped: dropped)
                    )
                }
            }
        }
        self.slots = [:]
        self.order = []
        self.queued = [:]
        self._bytes = 0
        return events
    }

    @usableFromInline
    static func open(_ kind: EventKind, _ payload: Payload, policy: CoalescingPolicy, at stamp: Stamp) throws(PostRefusal) -> Slot {
        let held: Held
        switch policy {
        case .latest, .first, .merge, .netChange: held = .payload(payload)
        case .count: held = .nothing
        case .sum(let field):
            guard let number = payload.number(at: field) else { throw .notANumber(kind: kind, field: field) }
            held = .sum(number)
        case .queue(let bound):
            held = .queue(dropped: bound > 0 ? 0 : 1)  // its entry, if it keeps one, is kept apart
        }
        return Slot(policy: policy, count: 1, first: stamp, last: stamp, held: held)
    }
}
