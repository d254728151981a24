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
public struct EventQueue<Payload: CoalescablePayload, Stamp: Comparable & Sendable>: Sendable {
    public typealias Event = CoalescedEvent<Payload, Stamp>

    /// What is held for one kind: enough to store it and to rebuild the queue from the store.
    public struct Slot: Sendable {
        public var policy: CoalescingPolicy
        public var count: Int
        public var first: Stamp
        public var last: Stamp
        public var held: Held

        public init(policy: CoalescingPolicy, count: Int, first: Stamp, last: Stamp, held: Held) {
            self.policy = policy
            self.count = count
            self.first = first
            self.last = last
            self.held = held
        }
    }

    /// What a slot keeps, by policy: a payload (latest, first, merge, netChange), nothing (count), a sum, or a
    /// bounded list (queue).
    public enum Held: Sendable {
        case payload(Payload)
        case nothing
        case sum(Double)
        case list([(payload: Payload, posted: Stamp)], dropped: Int)
    }

    /// The most kinds held at once.
    public let kindLimit: Int
    @usableFromInline var slots: [EventKind: Slot] = [:]
    @usableFromInline var order: [EventKind] = []
    /// The bytes held, by ``bytes(of:)``: kept as posts come, so that a quota is checked without a walk.
    public var bytes: Int { self._bytes }
    @usableFromInline var _bytes = 0

    /// What a slot counts for, beyond its payloads: its kind, stamps and bookkeeping.
    @inlinable public static var slotOverhead: Int { 128 }
    /// What each entry of a queue kind (and each event sent and not acknowledged) counts for beyond its payload.
    @inlinable public static var entryOverhead: Int { 32 }

    /// The bytes a slot counts for.
    @inlinable
    public static func bytes(of slot: Slot) -> Int {
        switch slot.held {
        case .payload(let payload): Self.slotOverhead + payload.size
        case .nothing, .sum: Self.slotOverhead
        case .list(let list, _): Self.slotOverhead + list.reduce(0) { $0 + Self.entryOverhead + $1.payload.size }
        }
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

    /// Puts back a slot read from the store; slots come back in the order they were first posted.
    public mutating func restore(_ kind: EventKind, _ slot: Slot) {
        self._bytes += Self.bytes(of: slot)
        if let replaced = self.slots.updateValue(slot, forKey: kind) {
            self._bytes -= Self.bytes(of: replaced)
        } else {
            self.order.append(kind)
        }
    }

    /// Puts `kind`'s slot back to what it was before a post (`nil`: the kind was not held), for a post the store
    /// could not keep.
    public mutating func reset(_ kind: EventKind, to slot: Slot?) {
        if let slot {
            self.restore(kind, slot)
        } else if let removed = self.slots.removeValue(forKey: kind) {
            self._bytes -= Self.bytes(of: removed)
            self.order.removeAll { $0 == kind }
        }
    }

    /// Sets what a later wake compares a netChange kind against (`nil`: nothing received yet), as restored from
    /// the store or taken back.
    public mutating func setBaseline(_ kind: EventKind, _ payload: Payload?) {
        self.lastDelivered[kind] = payload
    }

    /// Holds one post. A kind's slot keeps the policy of the post that opened it: a later post with another
    /// policy is folded into it by the slot's policy, so that what was held is never reinterpreted.
    /// - Throws: ``PostRefusal``; nothing changes then.
    // Inlinable: the daemon calls it for every post it holds, and a generic call across modules would look its
    // types up at run time.
    @inlinable
    public mutating func post(_ kind: EventKind, _ payload: Payload, policy: CoalescingPolicy, at stamp: Stamp) throws(PostRefusal) {
        guard let index = self.slots.index(forKey: kind) else {
            guard self.order.count < self.kindLimit else { throw .tooManyKinds(limit: self.kindLimit) }
            let slot = try Self.open(kind, payload, policy: policy, at: stamp)
            self._bytes += Self.bytes(of: slot)
            self.slots[kind] = slot
            self.order.append(kind)
            return
        }
        // In place: a queue kind's list is appended to, not copied.
        self._bytes += try Self.fold(&self.slots.values[index], kind, payload, at: stamp)
    }

    /// Folds a post into its kind's slot; returns by how many bytes the slot grew (or shrank).
    @inlinable
    static func fold(_ slot: inout Slot, _ kind: EventKind, _ payload: Payload, at stamp: Stamp) throws(PostRefusal) -> Int {
        var grown = 0
        switch slot.policy {
        case .latest, .netChange:
            if case .payload(let replaced) = slot.held { grown = payload.size - replaced.size }
            slot.held = .payload(payload)
        case .first, .count: break
        case .sum(let field):
            guard case .sum(let total) = slot.held else { preconditionFailure("a sum slot holds a sum") }  // open() pairs them
            guard let number = payload.number(at: field) else { throw .notANumber(kind: kind, field: field) }
            slot.held = .sum(total + number)
        case .merge:
            guard case .payload(let base) = slot.held else { preconditionFailure("a merge slot holds a payload") }
            let merged = base.merged(with: payload)
            grown = merged.size - base.size
            slot.held = .payload(merged)
        case .queue(let bound):
            guard case .list(var list, let dropped) = slot.held else { preconditionFailure("a queue slot holds a list") }
            slot.held = .nothing  // the list's only reference is now `list`: appending does not copy it
            list.append((payload, stamp))
            grown = Self.entryOverhead + payload.size
            let excess = max(0, list.count - bound)
            for entry in list.prefix(excess) { grown -= Self.entryOverhead + entry.payload.size }
            list.removeFirst(excess)
            slot.held = .list(list, dropped: dropped + excess)
        }
        slot.count += 1
        slot.last = max(slot.last, stamp)
        return grown
    }

    /// Everything held, coalesced: one event per kind in order of first post (a queue kind: each of its events,
    /// then its overflow marker), and the queue is left empty. netChange kinds whose latest payload equals what the
    /// app last received produce nothing.
    public mutating func drain() -> [Event] {
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
            case .list(let list, let dropped):
                for entry in list {
                    events.append(Event(kind: kind, payload: entry.payload, count: 1, firstPosted: entry.posted, lastPosted: entry.posted))
                }
                if dropped > 0 {
                    events.append(
                        Event(kind: kind, payload: nil, count: dropped, firstPosted: slot.first, lastPosted: slot.last, dropped: dropped)
                    )
                }
            }
        }
        self.slots.removeAll()
        self.order.removeAll()
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
            held = bound > 0 ? .list([(payload, stamp)], dropped: 0) : .list([], dropped: 1)
        }
        return Slot(policy: policy, count: 1, first: stamp, last: stamp, held: held)
    }
}
