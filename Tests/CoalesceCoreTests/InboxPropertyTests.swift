import CoalesceCore
import PropertyBased
import Testing

/// An inbox driven through random interleavings of posts, writes kept and refused, wakes and suspensions, streams
/// attached and lost, acknowledgements, retries and restarts of the daemon (a crash that keeps or loses the write
/// with the store), against a model of the store. Whatever the order: nothing accepted is lost, nothing is invented,
/// numbers on the stream only go up, and nothing is sent to an app that does not receive.
@Suite struct InboxPropertyTests {
    /// One step, decoded from a number so that the shrinker can make a failing run short.
    enum Step: Int, CaseIterable {
        case postA, postB, postVolatile, flush, keep, refuse, suspend, activate, detach, attach, ackAll, retry
        case crashKeepingTheWrite, crashLosingTheWrite
        /// Posts that came join the write the store has not begun (the store takes the replacement), or find it
        /// begun (the store refuses it).
        case joinTheWrite, findTheWriteBegun
        /// A durable post to a queue kind of bound 2: each post an entry row, the oldest dropped.
        case postQueue
    }

    /// The store as the inbox's writes leave it.
    struct Disk {
        var held: [EventKind: (position: Int, slot: TestInbox.Queue.Slot)] = [:]
        /// Each queue kind's entries by serial.
        var queued: [EventKind: [Int: TestInbox.Queue.Entry]] = [:]
        /// What the store would refuse: an entry under a serial already taken.
        var problems: [String] = []
        var deliveries: [Int64: Event] = [:]
        var nextID: Int64 = 1

        /// Applies a kept write; returns its deliveries' ids.
        mutating func apply(_ rows: [TestInbox.Row]) -> [Int64] {
            var ids: [Int64] = []
            for row in rows {
                switch row {
                case .hold(let kind, let position, let slot):
                    // As the store's upsert: a kind keeps the position its row was created with.
                    self.held[kind] = (self.held[kind]?.position ?? position, slot)
                case .enqueue(let kind, let entry):
                    if self.queued[kind, default: [:]].updateValue(entry, forKey: entry.serial) != nil {
                        self.problems.append("entry \(entry.serial) of \(kind) written twice")
                    }
                case .dropQueued(let kind, let before): self.queued[kind] = self.queued[kind]?.filter { $0.key >= before }.nilIfEmpty
                case .clearHeld:
                    self.held.removeAll()
                    self.queued.removeAll()
                case .delivery(let event):
                    self.deliveries[self.nextID] = event
                    ids.append(self.nextID)
                    self.nextID += 1
                case .baseline: break
                }
            }
            return ids
        }
    }

    struct World {
        var inbox = TestInbox(kindLimit: 8)
        var reception = Reception(runs: false, attached: false)
        var next: UInt64 = 1
        var clock = 0
        var disk = Disk()
        /// The rows of the write with the store.
        var pending: [TestInbox.Row]?
        var postNumber = 0
        var kinds: [String: EventKind] = [:]
        /// Durable posts not yet in a write, and those in the write with the store, unanswered.
        var waiting: [String] = []
        var inWrite: [String] = []
        /// Durable posts per kind that are on disk: answered sent or held, or in a write a crash kept.
        var accepted: [EventKind: Int] = [:]
        /// Per kind, the posts the app handled: counted once per stored event, when it is acknowledged.
        var handled: [EventKind: Int] = [:]
        var lastSeq: UInt64 = 0
        var generation: UInt64 = 0
        var problems: [String] = []

        let a = try! EventKind("a")
        let b = try! EventKind("b")
        let volatile = try! EventKind("v")
        let queue = try! EventKind("q")

        mutating func carry(_ actions: [TestInbox.Action]) {
            for action in actions {
                switch action {
                case .write(let rows):
                    if self.pending != nil { self.problems.append("a second write while one is with the store") }
                    self.pending = rows
                    // The inbox makes a write of everything that waits.
                    self.inWrite = self.waiting
                    self.waiting = []
                case .send(let burst):
                    if !self.reception.receives { self.problems.append("sent to an app that does not receive") }
                    for sent in burst {
                        if sent.seq <= self.lastSeq { self.problems.append("number \(sent.seq) after \(self.lastSeq)") }
                        self.lastSeq = sent.seq
                    }
                case .answer(let answers):
                    for (ticket, answer) in answers {
                        guard let kind = self.kinds[ticket] else { continue }
                        self.waiting.removeAll { $0 == ticket }
                        self.inWrite.removeAll { $0 == ticket }
                        if answer == .sent || answer == .held { self.accepted[kind, default: 0] += 1 }
                    }
                case .forget(let ids):
                    for id in ids {
                        guard let event = self.disk.deliveries.removeValue(forKey: id) else {
                            self.problems.append("forgot \(id), which is not stored")
                            continue
                        }
                        self.handled[event.kind, default: 0] += event.count
                    }
                case .retryLater: break
                }
            }
        }

        mutating func post(_ kind: EventKind, durable: Bool, policy: CoalescingPolicy = .count) {
            self.postNumber += 1
            self.clock += 1
            let ticket = "p\(self.postNumber)"
            if durable {
                self.kinds[ticket] = kind
                self.waiting.append(ticket)
            }
            let post = TestInbox.Post(kind: kind, payload: Fields([:]), policy: policy, durable: durable, posted: self.clock, ticket: ticket)
            switch self.inbox.posted(post, self.reception, next: &self.next) {
            case .waits: break
            case .answered(let answer, let burst): self.carry((burst.isEmpty ? [] : [.send(burst)]) + [.answer([(ticket, answer)])])
            }
        }

        mutating func keep() {
            guard let rows = self.pending else { return }
            self.pending = nil
            let ids = self.disk.apply(rows)
            self.carry(self.inbox.written(ids: ids, self.reception, next: &self.next))
        }

        mutating func refuse() {
            guard self.pending != nil else { return }
            self.pending = nil
            self.carry(self.inbox.writeFailed(self.reception, next: &self.next))
        }

        /// The daemon dies: the write with the store went to disk or not; everything else in memory is gone, and
        /// the next run starts from the disk, numbering past everything before.
        mutating func crash(keepingTheWrite: Bool) {
            if keepingTheWrite, let rows = self.pending {
                _ = self.disk.apply(rows)
                for ticket in self.inWrite { self.accepted[self.kinds[ticket]!, default: 0] += 1 }
            }
            self.pending = nil
            self.waiting = []
            self.inWrite = []
            self.inbox = TestInbox(kindLimit: 8)
            for (kind, row) in self.disk.held.sorted(by: { $0.value.position < $1.value.position }) {
                self.inbox.restore(kind, row.slot)
            }
            for (kind, entries) in self.disk.queued {
                for serial in entries.keys.sorted() { self.inbox.restore(kind, entries[serial]!) }
            }
            for (id, event) in self.disk.deliveries.sorted(by: { $0.key < $1.key }) {
                self.inbox.restore(TestInbox.Stored(id: id, event: event))
            }
            self.generation += 1
            self.next = self.generation << 32 + 1
            self.reception = Reception(runs: false, attached: false)
        }

        mutating func run(_ step: Step) {
            switch step {
            case .postA: self.post(self.a, durable: true)
            case .postB: self.post(self.b, durable: true)
            case .postVolatile: self.post(self.volatile, durable: false)
            case .postQueue: self.post(self.queue, durable: true, policy: .queue(bound: 2))
            case .flush: self.carry(self.inbox.flush(self.reception, next: &self.next))
            case .keep: self.keep()
            case .refuse: self.refuse()
            case .suspend: self.reception.runs = false
            case .activate:
                guard !self.reception.runs else { return }
                self.reception.runs = true
                self.next += 2  // the wake's callbacks, willEnterForeground and didBecomeActive
                self.lastSeq = max(self.lastSeq, self.next - 1)
                self.carry(self.inbox.woke(self.reception, next: &self.next))
            case .detach: self.reception.attached = false
            case .attach:
                self.reception.attached = true
                self.inbox.attached()
                self.carry(self.inbox.woke(self.reception, next: &self.next))
            case .ackAll: self.carry(self.inbox.acknowledged(upTo: self.lastSeq, self.reception, next: &self.next))
            case .retry: self.carry(self.inbox.retry(self.reception, next: &self.next))
            case .joinTheWrite:
                guard let rows = self.pending else { return }
                var taken: TestInbox.Amended?
                let actions = self.inbox.join(self.reception) { change in
                    taken = change
                    return true
                }
                guard let taken else { return }
                self.pending = Array(rows.prefix(taken.kept)) + taken.added
                self.inWrite += self.waiting
                self.waiting = []
                self.carry(actions)
            case .findTheWriteBegun:
                self.carry(self.inbox.join(self.reception) { _ in false })
            case .crashKeepingTheWrite: self.crash(keepingTheWrite: true)
            case .crashLosingTheWrite: self.crash(keepingTheWrite: false)
            }
        }

        /// What the app's events take, counted from scratch, against the inbox's own count (checked between writes,
        /// when the inbox's count is of what it holds, not of a write's outcome).
        mutating func checkFootprint() {
            guard !self.inbox.writing else { return }
            let held = self.inbox.held.kinds.reduce(0) { $0 + self.inbox.held.bytes(of: $1) }
            let outstanding = (self.inbox.unacknowledged.map(\.event) + self.inbox.undelivered.map(\.event))
                .reduce(0) { $0 + TestInbox.bytes(of: $1) }
            if self.inbox.footprint != held + outstanding {
                self.problems.append("footprint \(self.inbox.footprint), counted \(held + outstanding)")
            }
        }

        /// Wakes the app and lets everything through, the store keeping every write, the app acknowledging all.
        mutating func settle() {
            if !self.reception.attached { self.run(.attach) }
            self.run(.activate)
            for _ in 0..<10 {
                self.run(.retry)
                self.run(.flush)
                self.keep()
                self.run(.ackAll)
            }
        }
    }

    @Test func nothingLostNothingInventedNumbersGoUp() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...(Step.allCases.count - 1)).array(of: 0...80)) { codes in
            var world = World()
            for code in codes {
                world.run(Step(rawValue: code)!)
                world.checkFootprint()
            }
            world.settle()
            world.checkFootprint()
            #expect(world.problems + world.disk.problems == [], "steps: \(codes.map { "\(Step(rawValue: $0)!)" })")
            #expect(world.inbox.held.isEmpty && world.inbox.outstanding == 0 && !world.inbox.writing, "everything went out")
            #expect(world.inbox.footprint == 0, "and takes no memory")
            #expect(world.disk.held.isEmpty && world.disk.queued.isEmpty && world.disk.deliveries.isEmpty, "and the store is empty")
            for kind in [world.a, world.b, world.queue] {
                #expect(
                    world.handled[kind, default: 0] == world.accepted[kind, default: 0],
                    "\(kind): every accepted post handled once, no more: steps \(codes.map { "\(Step(rawValue: $0)!)" })"
                )
            }
        }
    }
}

extension Dictionary {
    /// `nil` for an empty dictionary, as the store has no rows for a kind whose entries all went.
    var nilIfEmpty: Self? { self.isEmpty ? nil : self }
}
