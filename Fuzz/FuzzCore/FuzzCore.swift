import CoalesceCore

/// One app's lifecycle and inbox driven together, as the manager drives them, by steps decoded from the fuzzer's
/// bytes: requests to the lifecycle and the passing of time; posts of several policies, durable and volatile; the
/// store keeping or refusing a write, or taking posts into it; streams attached and lost; acknowledgements; and
/// restarts of the daemon that keep or lose the write with the store. Both share the app's one sequence counter.
///
/// Invariants, each a trap when broken: the lifecycle moves only between legal states, from the state it is in,
/// and a refused request changes nothing; a suspended app holds no task and no mode; callbacks go only to an app
/// that runs code; nothing goes out on the stream of an app that does not receive; numbers on the stream only go
/// up; one write at a time; the store forgets only what it stored; and once the app is woken and everything is let
/// through, every accepted durable post was handled exactly once and nothing was invented.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCore(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    var bytes = UnsafeBufferPointer(start: start, count: count)[...]
    guard let setup = bytes.popFirst() else { return 0 }
    var world = World(exitsOnSuspend: setup & 1 != 0, backgroundMode: setup & 2 != 0)
    // A bound on steps keeps each run short; longer inputs add nothing a shorter one cannot reach.
    var steps = 0
    while let code = bytes.popFirst(), steps < 400 {
        steps += 1
        world.run(code, argument: bytes.popFirst() ?? 0)
    }
    world.settle()
    world.checkEverythingHandled()
    return 0
}

/// Time for the lifecycle: an offset that moves only when a step says so.
struct FuzzInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> FuzzInstant { FuzzInstant(offset: self.offset + duration) }
    func duration(to other: FuzzInstant) -> Duration { other.offset - self.offset }
    static func < (lhs: FuzzInstant, rhs: FuzzInstant) -> Bool { lhs.offset < rhs.offset }
}

/// A payload of numeric members, enough for every policy.
struct Numbers: CoalescablePayload {
    var members: [String: Double]
    func merged(with newer: Numbers) -> Numbers { Numbers(members: self.members.merging(newer.members) { _, later in later }) }
    func number(at field: String) -> Double? { self.members[field] }
    static func sum(_ sum: Double, at field: String) -> Numbers { Numbers(members: [field: sum]) }
    /// As if each member took 16 bytes of JSON, in braces.
    var size: Int { 2 + 16 * self.members.count }
}

typealias FuzzInbox = Inbox<Numbers, Int, Int>

/// The store as the inbox's writes leave it.
struct Disk {
    var held: [EventKind: (position: Int, slot: FuzzInbox.Queue.Slot)] = [:]
    /// Each queue kind's entries by serial.
    var queued: [EventKind: [Int: FuzzInbox.Queue.Entry]] = [:]
    var deliveries: [Int64: FuzzInbox.Event] = [:]
    var nextID: Int64 = 1

    /// Applies a kept write; returns its deliveries' ids.
    mutating func apply(_ rows: [FuzzInbox.Row]) -> [Int64] {
        var ids: [Int64] = []
        for row in rows {
            switch row {
            case .hold(let kind, let position, let slot): self.held[kind] = (self.held[kind]?.position ?? position, slot)
            case .enqueue(let kind, let entry):
                let taken = self.queued[kind, default: [:]].updateValue(entry, forKey: entry.serial) != nil
                check(!taken, "entry \(entry.serial) of \(kind) written twice")
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
    let traits: AppTraits
    var timings = LifecycleTimings()
    var lifecycle: AppLifecycle<FuzzInstant>
    var inbox = FuzzInbox(kindLimit: 8)
    var now = FuzzInstant(offset: .zero)
    var attached = false
    var disk = Disk()
    /// The rows of the write with the store.
    var pending: [FuzzInbox.Row]?
    /// The state the lifecycle's transitions say the app is in.
    var tracked = AppState.notRunning
    var resignPending = false
    var lastSeq: UInt64 = 0
    var generation: UInt64 = 0
    var postNumber = 0
    var clock = 0
    /// Durable posts of counted kinds by ticket, and those waiting for a write and in the write with the store.
    var kinds: [Int: EventKind] = [:]
    var waiting: [Int] = []
    var inWrite: [Int] = []
    /// Durable posts per counted kind that are on disk, and those the app handled (counted per stored event when
    /// it is acknowledged).
    var accepted: [EventKind: Int] = [:]
    var handled: [EventKind: Int] = [:]

    /// Kinds whose posts are counted: every policy but netChange, which delivers nothing when nothing changed.
    static let counted = ["count", "latest", "sum", "queue", "merge", "first"].map { try! EventKind($0) }
    static let policies: [CoalescingPolicy] = [.count, .latest, .sum(field: "n"), .queue(bound: 2), .merge, .first]
    static let netChange = try! EventKind("net")
    static let volatile = try! EventKind("volatile")

    init(exitsOnSuspend: Bool, backgroundMode: Bool) {
        self.traits = AppTraits(backgroundModes: backgroundMode ? ["audio"] : [], exitsOnSuspend: exitsOnSuspend)
        self.lifecycle = AppLifecycle(traits: self.traits, timings: self.timings)
    }

    var reception: Reception { Reception(runs: self.lifecycle.receivesAtOnce, attached: self.attached) }

    // MARK: Steps

    mutating func run(_ code: UInt8, argument: UInt8) {
        switch code % 24 {
        case 0: self.request { app, now throws(LifecycleError) in try app.launch(.foreground, now: now) }
        case 1: self.request { app, now throws(LifecycleError) in try app.launch(.background, now: now) }
        case 2: self.request { app, now throws(LifecycleError) in try app.activate(now: now) }
        case 3: self.request { app, now throws(LifecycleError) in try app.deactivate(now: now) }
        case 4: self.request { app, now throws(LifecycleError) in try app.interruptionBegan(now: now) }
        case 5: self.request { app, now throws(LifecycleError) in try app.interruptionEnded(now: now) }
        case 6: self.request { app, now throws(LifecycleError) in try app.terminate(now: now) }
        case 7: self.request { app, now throws(LifecycleError) in try app.purge(now: now) }
        case 8: self.request { app, now in app.processExited(now: now) }
        case 9:
            let tasks = self.lifecycle.tasks.count
            do {
                _ = try self.lifecycle.beginBackgroundTask(name: "t", now: self.now)
                check(self.lifecycle.tasks.count == tasks + 1, "a task begun is not held")
            } catch {
                check(self.lifecycle.tasks.count == tasks, "a refused task changed the tasks")
            }
        case 10:
            let id = self.lifecycle.tasks.keys.sorted().first.map { $0 + Int(argument % 2) } ?? Int(argument)
            self.request { app, now throws(LifecycleError) in try app.endBackgroundTask(id, now: now) }
        case 11:
            self.now = self.now.advanced(by: .milliseconds(Int64(argument) * 250))
            self.request { app, now in app.timePassed(now: now) }
        case 12: self.acknowledge()
        case 13, 14, 15: self.post(argument)
        case 16: self.step { $0.flush($1, next: &$2) }
        case 17: self.keep()
        case 18: self.refuse()
        case 19: self.step { $0.retry($1, next: &$2) }
        case 20:
            if argument & 1 == 0 {
                self.joinTheWrite()
            } else {
                let reception = self.reception
                self.carry(self.inbox.join(reception) { _ in false })
            }
        case 21: self.attach()
        case 22: self.attached = false
        default: self.crash(keepingTheWrite: argument & 1 == 0)
        }
    }

    /// A request to the lifecycle: its effects checked and carried out; a wake lets the inbox send.
    mutating func request(
        _ body: (inout AppLifecycle<FuzzInstant>, FuzzInstant) throws(LifecycleError) -> [LifecycleEffect]
    ) {
        let before = (self.lifecycle.state, self.lifecycle.tasks, self.lifecycle.interrupted, self.lifecycle.nextSequence)
        let received = self.reception.receives
        let effects: [LifecycleEffect]
        do {
            effects = try body(&self.lifecycle, self.now)
        } catch {
            let after = (self.lifecycle.state, self.lifecycle.tasks, self.lifecycle.interrupted, self.lifecycle.nextSequence)
            check(before == after, "a refused request (\(error)) changed the app")
            return
        }
        for effect in effects {
            switch effect {
            case .transition(let from, let to, _):
                check(from == self.tracked, "a transition from \(from) while \(self.tracked)")
                check(from != to, "a transition from \(from) to itself")
                self.tracked = to
                if to == .notRunning { self.resignPending = false }
            case .deliver(let callback, let sequence, _):
                check(self.tracked != .suspended && self.tracked != .notRunning, "\(callback) sent while \(self.tracked)")
                self.numbered(sequence)
                switch callback {
                case .willResignActive:
                    check(!self.resignPending, "willResignActive twice")
                    self.resignPending = true
                case .didBecomeActive, .didEnterBackground: self.resignPending = false
                case .willEnterForeground: check(!self.resignPending, "willEnterForeground after willResignActive")
                default: break
                }
            case .kill, .terminate: break
            case .launchesHeld(let failed):
                check(self.lifecycle.launchesHeld, "told launches are held (\(failed) failed) while they are not")
            }
        }
        check(self.lifecycle.state == self.tracked, "state \(self.lifecycle.state), transitions say \(self.tracked)")
        if self.lifecycle.state == .suspended {
            check(self.lifecycle.tasks.isEmpty && self.traits.backgroundModes.isEmpty, "suspended with work to do")
        }
        check(self.lifecycle.state.isRunning || self.lifecycle.tasks.isEmpty, "tasks held by an app not running")
        // The process is gone with the app: its stream closes.
        if !self.lifecycle.state.isRunning { self.attached = false }
        if !received && self.reception.receives {
            self.step { $0.woke($1, next: &$2) }
        }
    }

    mutating func numbered(_ sequence: UInt64) {
        check(sequence > self.lastSeq, "number \(sequence) after \(self.lastSeq)")
        self.lastSeq = sequence
    }

    mutating func acknowledge() {
        let effects = self.lifecycle.acknowledge(upTo: self.lastSeq, now: self.now)
        self.request { _, _ in effects }
        let seq = self.lastSeq
        self.step { $0.acknowledged(upTo: seq, $1, next: &$2) }
    }

    mutating func post(_ argument: UInt8) {
        self.postNumber += 1
        self.clock += 1
        let ticket = self.postNumber
        let choice = Int(argument % 16)
        let kind: EventKind
        let policy: CoalescingPolicy
        let durable = choice != 15
        switch choice {
        case 0..<12:
            // Kinds and policies mixed: a kind's slot keeps the policy of the post that opened it.
            kind = Self.counted[choice % Self.counted.count]
            policy = Self.policies[(choice + Int(argument >> 4)) % Self.policies.count]
        case 12..<15:
            kind = Self.netChange
            policy = .netChange
        default:
            kind = Self.volatile
            policy = .latest
        }
        if durable && kind != Self.netChange {
            self.kinds[ticket] = kind
            self.waiting.append(ticket)
        }
        let payload = Numbers(members: ["n": Double(argument >> 4)])
        let post = FuzzInbox.Post(kind: kind, payload: payload, policy: policy, durable: durable, posted: self.clock, ticket: ticket)
        let reception = self.reception
        switch self.inbox.posted(post, reception, next: &self.lifecycle.nextSequence) {
        case .waits: break
        case .answered(let answer, let burst):
            self.carry((burst.isEmpty ? [] : [.send(burst)]) + [.answer([(ticket, answer)])])
        }
    }

    mutating func keep() {
        guard let rows = self.pending else { return }
        self.pending = nil
        let ids = self.disk.apply(rows)
        self.step { $0.written(ids: ids, $1, next: &$2) }
    }

    mutating func refuse() {
        guard self.pending != nil else { return }
        self.pending = nil
        self.step { $0.writeFailed($1, next: &$2) }
    }

    mutating func joinTheWrite() {
        guard let rows = self.pending else { return }
        var taken: FuzzInbox.Amended?
        let reception = self.reception
        let actions = self.inbox.join(reception) { change in
            taken = change
            return true
        }
        guard let taken else { return }
        check(taken.kept <= rows.count, "a joined write keeps more rows than it had")
        self.pending = Array(rows.prefix(taken.kept)) + taken.added
        self.inWrite += self.waiting
        self.waiting = []
        self.carry(actions)
    }

    mutating func attach() {
        // Attaching an app that is not running launches it, as Attach does.
        if !self.lifecycle.state.isRunning {
            self.request { app, now throws(LifecycleError) in try app.launch(.foreground, now: now) }
        }
        self.attached = true
        self.inbox.attached()
        self.step { $0.woke($1, next: &$2) }
    }

    /// The daemon dies: the write with the store went to disk or not; everything else in memory is gone. The next
    /// run starts from the disk, numbering past everything before, and takes up the app's recorded state.
    mutating func crash(keepingTheWrite: Bool) {
        if keepingTheWrite, let rows = self.pending {
            _ = self.disk.apply(rows)
            for ticket in self.inWrite { self.accepted[self.kinds[ticket]!, default: 0] += 1 }
        }
        self.pending = nil
        self.waiting = []
        self.inWrite = []
        self.inbox = FuzzInbox(kindLimit: 8)
        for (kind, row) in self.disk.held.sorted(by: { $0.value.position < $1.value.position }) {
            self.inbox.restore(kind, row.slot)
        }
        for (kind, entries) in self.disk.queued {
            for serial in entries.keys.sorted() { self.inbox.restore(kind, entries[serial]!) }
        }
        for (id, event) in self.disk.deliveries.sorted(by: { $0.key < $1.key }) {
            self.inbox.restore(FuzzInbox.Stored(id: id, event: event))
        }
        self.generation += 1
        let recorded = self.lifecycle.state
        let interrupted = self.lifecycle.interrupted
        self.lifecycle = AppLifecycle(traits: self.traits, timings: self.timings, firstSequence: self.generation << 32 + 1)
        self.tracked = self.lifecycle.restore(recorded, interrupted: interrupted) ?? .notRunning
        if self.tracked == .notRunning { self.resignPending = false }
        self.attached = false
    }

    /// An input to the inbox, as the app receives now, numbered from the app's counter; its actions carried out.
    mutating func step(_ input: (inout FuzzInbox, Reception, inout UInt64) -> [FuzzInbox.Action]) {
        let reception = self.reception
        let actions = input(&self.inbox, reception, &self.lifecycle.nextSequence)
        self.carry(actions)
    }

    /// Carries out the inbox's actions, checking each.
    mutating func carry(_ actions: [FuzzInbox.Action]) {
        for action in actions {
            switch action {
            case .write(let rows):
                check(self.pending == nil, "a second write while one is with the store")
                self.pending = rows
                self.inWrite = self.waiting
                self.waiting = []
            case .send(let burst):
                check(self.reception.receives, "sent to an app that does not receive")
                for sent in burst { self.numbered(sent.seq) }
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
                        fail("forgot \(id), which is not stored")
                    }
                    self.handled[event.kind, default: 0] += event.count
                }
            case .retryLater: break
            }
        }
    }

    // MARK: The end

    /// Brings the app to the foreground, attached, and lets everything through: the store keeps every write, the
    /// app acknowledges all.
    mutating func settle() {
        if !self.attached { self.attach() }
        for _ in 0..<3 where self.lifecycle.state != .active {
            switch self.lifecycle.state {
            case .notRunning: self.attach()
            case .inactive where self.lifecycle.interrupted:
                self.request { app, now throws(LifecycleError) in try app.interruptionEnded(now: now) }
            default: self.request { app, now throws(LifecycleError) in try app.activate(now: now) }
            }
        }
        check(self.reception.receives, "the app does not receive after settling: \(self.lifecycle.state)")
        for _ in 0..<10 {
            self.step { $0.retry($1, next: &$2) }
            self.step { $0.flush($1, next: &$2) }
            self.keep()
            self.acknowledge()
        }
    }

    func checkEverythingHandled() {
        check(self.inbox.held.isEmpty && self.inbox.outstanding == 0 && !self.inbox.writing, "something did not go out")
        check(self.disk.held.isEmpty && self.disk.queued.isEmpty && self.disk.deliveries.isEmpty, "the store is not empty")
        for kind in Self.counted {
            let accepted = self.accepted[kind, default: 0]
            let handled = self.handled[kind, default: 0]
            check(handled == accepted, "\(kind): \(accepted) posts accepted, \(handled) handled")
        }
    }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

func fail(_ message: String) -> Never {
    fatalError("fuzz-core: \(message)")
}

extension Dictionary {
    /// `nil` for an empty dictionary, as the store has no rows for a kind whose entries all went.
    var nilIfEmpty: Self? { self.isEmpty ? nil : self }
}
