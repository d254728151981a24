/// What an app's inbox needs to know of the app to decide whether an event goes out now.
public struct Reception: Sendable, Hashable {
    /// The app runs code and is not suspended (``AppLifecycle/receivesAtOnce``).
    public var runs: Bool
    /// Its process has a stream attached.
    public var attached: Bool
    /// The stream's unread replies are under their bound: an app that does not read gets its events held.
    public var keepsUp: Bool
    /// How many bytes the app's events may take in memory, and the quota that says so; `nil`: no bound.
    public var allowance: Allowance?

    public init(runs: Bool, attached: Bool, keepsUp: Bool = true, allowance: Allowance? = nil) {
        self.runs = runs
        self.attached = attached
        self.keepsUp = keepsUp
        self.allowance = allowance
    }

    /// Whether events can go out on the stream now.
    public var receives: Bool { self.runs && self.attached }
}

/// The bytes an app's events may take in memory in all (``Inbox/footprint``), by the quota that binds first.
public struct Allowance: Sendable, Hashable {
    public var bytes: Int
    public var quota: Quota

    public init(bytes: Int, quota: Quota) {
        self.bytes = bytes
        self.quota = quota
    }
}

/// One app's events, as a pure state machine: what it holds while it receives nothing, what it was sent and has
/// not acknowledged, what is stored and not yet sent, and the one write of the app's the store is carrying out.
/// Each input returns what to do, as values (write these rows, send these events, answer these posts); it knows
/// nothing of sockets, clocks or disks.
///
/// The rules, each decided here and nowhere else:
/// - A post is sent at once to an app that runs, is attached, keeps up with its stream, has fewer than
///   ``maximumUnacknowledged`` events outstanding and no refused delivery waiting to be tried again; otherwise it
///   is held, coalesced by its kind's policy.
/// - What the app holds goes out before anything sent after it. The shell sends a wake's callbacks before it
///   carries out ``woke(_:next:)``'s actions, so a wake's events follow its callbacks.
/// - An event goes out only once the write that stores it is on disk, in the order the writes were decided, and is
///   numbered as it goes out. A volatile kind's events are never stored.
/// - At most one write of the app's is with the store at a time. Posts that come before the store begins it join
///   it (decided onto it, ``join(_:changing:)``); those that come later wait and are decided when the next
///   write is made (``flush(_:next:)``). What a write changes of what the app holds is taken back if the store
///   refuses it: a refused write never leaves memory ahead of the store, and nothing decided after it depends on it.
/// - A refused delivery of what the app held leaves it held (tried again later, ``retry(_:next:)``); posts
///   decided meanwhile are held behind it.
/// - A new stream gets what was sent and not acknowledged again, renumbered, before anything else.
/// - An app that acknowledges again after it fell behind gets what was held meanwhile, once it is under half of
///   ``maximumUnacknowledged``.
///
/// - A post that would take the app's events in memory (``footprint``) past its ``Reception/allowance`` is refused
///   (``PostRefusal/overQuota(_:)``), whether it would be sent or held: its user's quota or the daemon's ceiling.
///
/// Sequence numbers come from the app's one counter (``AppLifecycle/nextSequence``), passed in as `next`.
///
/// - `Ticket`: how the shell answers one post; the inbox hands it back in ``Action/answer(_:_:)``.
public struct Inbox<Payload: CoalescablePayload, Stamp: Comparable & Sendable, Ticket: Sendable>: Sendable {
    public typealias Queue = EventQueue<Payload, Stamp>
    public typealias Event = CoalescedEvent<Payload, Stamp>

    /// Events sent to an app and not acknowledged, past which its posts are held until it catches up.
    public static var maximumUnacknowledged: Int { 4096 }

    /// One post to this app.
    public struct Post: Sendable {
        public var kind: EventKind
        public var payload: Payload
        public var policy: CoalescingPolicy
        /// Stored (durable), or kept in memory only (a volatile kind).
        public var durable: Bool
        public var posted: Stamp
        public var ticket: Ticket
        /// How many occurrences the post stands for (``EventQueue/post(_:_:policy:at:weight:)``).
        public var weight: Int

        @inlinable
        public init(
            kind: EventKind, payload: Payload, policy: CoalescingPolicy, durable: Bool, posted: Stamp, ticket: Ticket,
            weight: Int = 1
        ) {
            self.kind = kind
            self.payload = payload
            self.policy = policy
            self.durable = durable
            self.posted = posted
            self.ticket = ticket
            self.weight = weight
        }
    }

    /// An event stored and not yet sent: `id` is its number in the store, `nil` for a volatile kind's.
    public struct Stored: Sendable {
        public var id: Int64?
        public var event: Event

        @inlinable
        public init(id: Int64?, event: Event) {
            self.id = id
            self.event = event
        }
    }

    /// An event sent on the app's stream as `seq`.
    public struct Sent: Sendable {
        public var seq: UInt64
        /// Its number in the store; `nil` for a volatile kind's, which is never sent again.
        public var id: Int64?
        public var event: Event

        @inlinable
        init(seq: UInt64, id: Int64?, event: Event) {
            self.seq = seq
            self.id = id
            self.event = event
        }
    }

    /// One change the store makes for this app.
    public enum Row: Sendable {
        /// What the app holds of a kind, as the slot says (replacing what was); `position` orders a new kind's row.
        /// A queue kind's entries have rows of their own.
        case hold(EventKind, position: Int, Queue.Slot)
        /// Keep one more entry of a queue kind.
        case enqueue(EventKind, Queue.Entry)
        /// Forget a queue kind's entries before the serial given: they were dropped past its bound.
        case dropQueued(EventKind, before: Int)
        /// Forget everything held, entries included: it was delivered.
        case clearHeld
        /// Keep the event until it is acknowledged; the store answers with its number.
        case delivery(Event)
        /// What the app last received of a netChange kind.
        case baseline(EventKind, Payload)
    }

    /// What a post came to.
    public enum Answer: Sendable, Hashable {
        /// Sent to the app (and on disk, unless volatile).
        case sent
        /// Held for the app.
        case held
        /// Refused by the kind's policy; nothing was held.
        case refused(PostRefusal)
        /// The store refused the write it went into; nothing of it was kept.
        case storeFailed
    }

    /// What the shell does, in the order given.
    public enum Action: Sendable {
        /// Hand these rows to the store as one write, answered by ``written(ids:_:next:)`` or
        /// ``writeFailed(_:next:)``. A write with no rows (volatile posts behind a stored one) still goes through
        /// the store, so that it is answered in its turn.
        case write([Row])
        /// Send these events on the app's stream, as one burst.
        case send([Sent])
        /// Answer these posts, in order.
        case answer([(ticket: Ticket, answer: Answer)])
        /// Forget these stored events: they were acknowledged.
        case forget([Int64])
        /// Try the refused delivery of what the app held again a little later, through ``retry(_:next:)``.
        case retryLater
    }

    /// What became of a post at once (``posted(_:_:next:)``).
    public enum Intake: Sendable {
        /// It waits for the next write (``flush(_:next:)``), which answers it.
        case waits
        /// Answered now, without the store (a volatile post); `sending` goes out on the stream first.
        case answered(Answer, sending: [Sent])
    }

    /// The write with the store, and what it changes once it is on disk. What it changes of what the app holds is
    /// made at once, and taken back if the store refuses the write (``EventQueue/takeBackChanges(to:)``).
    @usableFromInline
    struct Flight: Sendable {
        /// Where the held queue's changes stood when the write was made.
        @usableFromInline var mark: Queue.ChangeMark
        @usableFromInline var storedKinds: Set<EventKind>
        /// Events it decided to send, in order, and whether each is stored (ids come with the store's answer).
        @usableFromInline var events: [(stored: Bool, event: Event)] = []
        /// The bytes of those events (``Inbox/bytes(of:)``).
        @usableFromInline var eventBytes = 0
        @usableFromInline var answers: [(ticket: Ticket, answer: Answer)] = []
        /// It delivers what the app held.
        @usableFromInline var drains = false
        /// Whether it was to deliver what the app held (a wake, a retry).
        @usableFromInline var attempt = false
        /// Its rows, as the store has them; the last `tail` rows say how the kinds it holds stand (each kind's
        /// slot, and how far a queue kind dropped), written again as posts join.
        @usableFromInline var rows: [Row] = []
        @usableFromInline var tail = 0
        /// Stored kinds its posts hold, in the order first posted, since the last delivery in it.
        @usableFromInline var touched: [EventKind] = []

        @inlinable
        init(mark: Queue.ChangeMark, storedKinds: Set<EventKind>) {
            self.mark = mark
            self.storedKinds = storedKinds
        }
    }

    /// How a write changes when posts join it: its first `kept` rows stay, and `added` follow them.
    public struct Amended: Sendable {
        public var kept: Int
        public var added: [Row]

        @inlinable
        init(kept: Int, added: [Row]) {
            self.kept = kept
            self.added = added
        }
    }

    /// What the app holds: what is on disk (or in the write with the store), and, of volatile kinds, what is in
    /// memory only.
    public var held: Queue { self._held }
    @usableFromInline var _held: Queue
    /// The held kinds that have a row in the store (a kind only ever posted volatile has none).
    @usableFromInline var storedKinds: Set<EventKind> = []
    /// Sent and not acknowledged, in order.
    public var unacknowledged: [Sent] { self._unacknowledged }
    @usableFromInline var _unacknowledged: [Sent] = []
    /// Stored and not sent: the app stopped receiving before they were on disk, or an earlier run of the daemon
    /// stored them. They go out first when it receives again.
    public var undelivered: [Stored] { self._undelivered }
    @usableFromInline var _undelivered: [Stored] = []
    /// The bytes of what is unacknowledged and undelivered, kept as they change.
    @usableFromInline var outstandingBytes = 0
    /// Posts accepted and not yet in a write, in order.
    @usableFromInline var waiting: [Post] = []
    /// What the app holds is to go out with the next write (a wake, a retry, an app that caught up).
    @usableFromInline var drainWanted = false
    /// The last delivery of what the app held was refused and waits to be tried again: posts are held behind it.
    public var drainRefused: Bool { self._drainRefused }
    @usableFromInline var _drainRefused: Bool = false
    /// A new stream attached: what was not acknowledged goes out again, renumbered, once the app receives.
    @usableFromInline var redeliver = false
    @usableFromInline var flight: Flight?

    @inlinable
    public init(kindLimit: Int) {
        self._held = Queue(kindLimit: kindLimit)
    }

    /// A write of the app's is with the store.
    @inlinable public var writing: Bool { self.flight != nil }
    /// That write delivers what the app held.
    @inlinable public var draining: Bool { self.flight?.drains ?? false }
    /// Posts or a delivery wait for a write: ``flush(_:next:)``, or ``join(_:changing:)`` while one is with the store.
    @inlinable public var hasWaiting: Bool { !self.waiting.isEmpty || self.drainWanted }
    /// Posts or a delivery wait for ``flush(_:next:)``, and no write is with the store.
    @inlinable public var needsFlush: Bool { self.flight == nil && (!self.waiting.isEmpty || self.drainWanted) }
    /// Events sent or stored for the app and not acknowledged.
    @inlinable public var outstanding: Int { self._unacknowledged.count + self._undelivered.count }
    /// The bytes the app's events take in memory, as its quota counts them: what it holds (as its write with the
    /// store will leave it), what was stored and not sent, and what was sent and not acknowledged.
    @inlinable public var footprint: Int { self._held.bytes + self.outstandingBytes + (self.flight?.eventBytes ?? 0) }

    /// The bytes an event counts for in ``footprint``.
    @inlinable
    public static func bytes(of event: Event) -> Int { Queue.entryOverhead + (event.payload?.size ?? 0) }

    /// The quota a post of `size` bytes would pass, with the app's events at `footprint`; `nil` when it fits.
    @inlinable
    static func passes(_ reception: Reception, footprint: Int, adding size: Int) -> Quota? {
        guard let allowance = reception.allowance, footprint + Queue.slotOverhead + size > allowance.bytes else { return nil }
        return allowance.quota
    }

    // MARK: Inputs

    /// A post to the app. A volatile post with nothing of the app's waiting or with the store is decided now; any
    /// other waits for ``flush(_:next:)``, which the shell calls once it has taken in the posts that came together.
    /// (An ``Intake`` rather than a list of actions: this is the path of every post.)
    @inlinable
    public mutating func posted(_ post: Post, _ reception: Reception, next: inout UInt64) -> Intake {
        guard !post.durable, self.flight == nil, self.waiting.isEmpty, !self.drainWanted else {
            self.waiting.append(post)
            return .waits
        }
        if self.sendsNow(reception, besides: 0) {
            guard self._held.isEmpty else {
                self.waiting.append(post)  // what it held goes first, through the store
                return .waits
            }
            if let quota = Self.passes(reception, footprint: self.footprint, adding: post.payload.size) {
                return .answered(.refused(.overQuota(quota)), sending: [])
            }
            if post.policy == .netChange { self._held.setBaseline(post.kind, post.payload) }
            let event = Self.event(post)
            self._undelivered.append(Stored(id: nil, event: event))
            self.outstandingBytes += Self.bytes(of: event)
            // Empty while a new stream waits to get what it missed first.
            return .answered(.sent, sending: self.sendUndelivered(reception, next: &next))
        }
        do throws(PostRefusal) {
            if let quota = Self.passes(reception, footprint: self.footprint, adding: post.payload.size) {
                throw .overQuota(quota)
            }
            try self._held.post(post.kind, post.payload, policy: post.policy, at: post.posted, weight: post.weight)
            return .answered(.held, sending: [])
        } catch {
            return .answered(.refused(error), sending: [])
        }
    }

    /// Makes the next write from what waits, unless one is with the store: each waiting post is sent or held as
    /// the app is now, and what the app holds goes out first when it receives.
    @inlinable
    public mutating func flush(_ reception: Reception, next: inout UInt64) -> [Action] {
        guard self.needsFlush else { return [] }
        // A delivery asked for while the app does not receive waits for its next wake.
        let attempt = self.drainWanted && reception.receives
        self.drainWanted = false
        var flight = Flight(mark: self._held.beginChanges(), storedKinds: self.storedKinds)
        flight.attempt = attempt
        if attempt {
            self._drainRefused = false
            if !self._held.isEmpty { self.drain(&flight) }
        }
        let refusals = self.decide(self.waiting, into: &flight, reception)
        self.waiting.removeAll(keepingCapacity: true)  // the next posts to the app reuse its room
        let answers: [Action] = refusals.isEmpty ? [] : [.answer(refusals)]
        guard !flight.answers.isEmpty || flight.drains else {
            // Nothing to write: each post was refused (which changes nothing), or a wake found nothing held.
            self._held.keepChanges()
            return answers + self.sending(self.sendUndelivered(reception, next: &next))
        }
        let rows = flight.rows
        self.flight = flight
        return answers + [.write(rows)]
    }

    /// Posts came while the app's write waits for the store to take it: they join it, decided as if they had come
    /// with it, when `changing` (the store) takes the change to the write's rows; otherwise (the store has taken
    /// the write) they wait for its answer. Nothing joins while a delivery waits to be tried (it goes with the next
    /// write). Returns the answers to those the policy refused.
    @inlinable
    public mutating func join(_ reception: Reception, changing write: (Amended) -> Bool) -> [Action] {
        guard var flight = self.flight, !self.waiting.isEmpty, !self.drainWanted else { return [] }
        let kept = flight.rows.count - flight.tail
        let mark = self._held.markChanges()
        let refusals = self.decide(self.waiting, into: &flight, reception)
        guard write(Amended(kept: kept, added: Array(flight.rows[kept...]))) else {
            self._held.takeBackChanges(to: mark)
            return []
        }
        self.flight = flight
        self.waiting.removeAll(keepingCapacity: true)
        return refusals.isEmpty ? [] : [.answer(refusals)]
    }

    /// Decides `posts` into the write being made, in order: each sent or held as the app is now, what the app
    /// holds delivered first when it receives; a durable post to a queue kind adds its entry's row, and the kinds
    /// held end the rows, each as it stands after its last post. Changes what the app holds (as the write will
    /// leave it, taken back if the store refuses it) and the write; returns the posts the policy refused.
    @inlinable
    mutating func decide(_ posts: [Post], into flight: inout Flight, _ reception: Reception) -> [(ticket: Ticket, answer: Answer)] {
        var refusals: [(ticket: Ticket, answer: Answer)] = []
        flight.rows.removeLast(flight.tail)  // written again below, as the kinds stand at the end
        flight.answers.reserveCapacity(flight.answers.count + posts.count)
        // Each post read where it lies (`posts[index]`), not copied out whole: this is the path of every post.
        for index in posts.indices {
            let footprint = self._held.bytes + self.outstandingBytes + flight.eventBytes
            if let quota = Self.passes(reception, footprint: footprint, adding: posts[index].payload.size) {
                refusals.append((posts[index].ticket, .refused(.overQuota(quota))))
                continue
            }
            if self.sendsNow(reception, besides: flight.events.count, drainAttempted: flight.attempt) {
                if !self._held.isEmpty { self.drain(&flight) }
                if posts[index].policy == .netChange {
                    self._held.setBaseline(posts[index].kind, posts[index].payload)
                    if posts[index].durable { flight.rows.append(.baseline(posts[index].kind, posts[index].payload)) }
                }
                let event = Self.event(posts[index])
                if posts[index].durable { flight.rows.append(.delivery(event)) }
                flight.events.append((posts[index].durable, event))
                flight.eventBytes += Self.bytes(of: event)
                flight.answers.append((posts[index].ticket, .sent))
                continue
            }
            let appended: Bool
            do throws(PostRefusal) {
                appended = try self._held.post(
                    posts[index].kind, posts[index].payload, policy: posts[index].policy, at: posts[index].posted,
                    weight: posts[index].weight
                )
            } catch {
                refusals.append((posts[index].ticket, .refused(error)))
                continue
            }
            flight.answers.append((posts[index].ticket, .held))
            guard posts[index].durable else { continue }
            // A kind it touches is stored from now on; the list is short, and cheaper to look in than to hash.
            if !flight.touched.contains(posts[index].kind) {
                if !flight.storedKinds.contains(posts[index].kind) { flight.storedKinds.insert(posts[index].kind) }
                flight.touched.append(posts[index].kind)
            }
            // A queue kind's entry is a row of its own: a post appends one row, whatever the queue holds.
            if appended, let entry = self._held.newestEntry(of: posts[index].kind) {
                flight.rows.append(.enqueue(posts[index].kind, entry))
            }
        }
        let kinds = self._held.kinds
        let tailStart = flight.rows.count
        for kind in flight.touched {
            guard let slot = self._held.slot(of: kind), let position = kinds.firstIndex(of: kind) else { continue }
            flight.rows.append(.hold(kind, position: position, slot))
            if case .queue(let dropped) = slot.held, dropped > 0, let first = self._held.firstKept(of: kind) {
                flight.rows.append(.dropQueued(kind, before: first))
            }
        }
        flight.tail = flight.rows.count - tailStart
        return refusals
    }

    // MARK: Rules

    /// Whether a post goes out now, `besides` the events already decided to go out in the write being made. A
    /// refused delivery holds posts back, unless this write tries it again.
    @inlinable
    func sendsNow(_ reception: Reception, besides: Int, drainAttempted: Bool = false) -> Bool {
        reception.receives && reception.keepsUp && (!self._drainRefused || drainAttempted)
            && self.outstanding + besides < Self.maximumUnacknowledged
    }

    /// Everything held, coalesced, into the write being made: the held rows go, each event is stored (a volatile
    /// kind's is not), and a netChange kind's baseline moves to what it delivers.
    @inlinable
    mutating func drain(_ flight: inout Flight) {
        flight.drains = true
        let netChange = Set(self._held.kinds.filter { self._held.policy(of: $0) == .netChange })
        if !flight.storedKinds.isEmpty { flight.rows.append(.clearHeld) }
        for event in self._held.drain() {
            let stored = flight.storedKinds.contains(event.kind)
            if stored {
                flight.rows.append(.delivery(event))
                if let payload = event.payload, netChange.contains(event.kind) {
                    flight.rows.append(.baseline(event.kind, payload))
                }
            }
            flight.events.append((stored, event))
            flight.eventBytes += Self.bytes(of: event)
        }
        flight.storedKinds.removeAll()
        flight.touched.removeAll()  // the kinds' rows went before the clear: they count no more
        flight.tail = 0
    }

    /// Sends what was stored for the app and not yet sent, as one burst, if it receives now.
    @inlinable
    mutating func sendUndelivered(_ reception: Reception, next: inout UInt64) -> [Sent] {
        guard reception.receives, !self.redeliver, !self._drainRefused, !self._undelivered.isEmpty else { return [] }
        var burst: [Sent] = []
        burst.reserveCapacity(self._undelivered.count)
        for stored in self._undelivered {
            let sent = Self.numbered(stored.id, stored.event, &next)
            burst.append(sent)
            if stored.id != nil {
                self._unacknowledged.append(sent)
            } else {
                self.outstandingBytes -= Self.bytes(of: stored.event)  // a volatile event is not kept once sent
            }
        }
        self._undelivered.removeAll(keepingCapacity: true)
        return burst
    }

    /// A burst as an action; none when it is empty.
    @inlinable
    func sending(_ burst: [Sent]) -> [Action] { burst.isEmpty ? [] : [.send(burst)] }

    @inlinable
    static func numbered(_ id: Int64?, _ event: Event, _ next: inout UInt64) -> Sent {
        defer { next += 1 }
        return Sent(seq: next, id: id, event: event)
    }

    @inlinable
    static func event(_ post: Post) -> Event {
        Event(kind: post.kind, payload: post.payload, count: post.weight, firstPosted: post.posted, lastPosted: post.posted)
    }
}
