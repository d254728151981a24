import CoalesceCore
import Testing

typealias TestInbox = Inbox<Fields, Int, String>

/// An inbox with the store and the app around it played by the test: each input's actions are written down as short
/// lines, so a case reads like a table of what goes in and what comes out.
///
/// - `write[...]`: the rows of a write (`hold kind×count@position`, `enqueue kind#serial`, `drop kind<serial`,
///   `clear`, `deliver kind×count`, `baseline kind`)
/// - `send[...]`: events sent as one burst (`seq:kind×count`, with `v` for a volatile one, never stored)
/// - `p1 sent|held|refused|failed`: a post's answer; `forget[...]`: store ids acknowledged; `retry`
struct InboxHarness {
    var inbox = TestInbox(kindLimit: 8)
    var reception = Reception(runs: true, attached: true)
    /// The next number on the app's stream.
    var next: UInt64 = 1
    var clock = 0
    /// What the store gave the last write's deliveries.
    var nextID: Int64 = 1
    /// The rows of the write with the store.
    var pending: [TestInbox.Row] = []

    static let suspended = Reception(runs: false, attached: true)
    static let running = Reception(runs: true, attached: true)

    mutating func post(
        _ ticket: String,
        _ kind: String,
        _ value: Double = 0,
        _ policy: CoalescingPolicy = .count,
        durable: Bool = true,
        weight: Int = 1
    ) -> [String] {
        self.clock += 1
        let post = TestInbox.Post(
            kind: try! EventKind(kind),
            payload: Fields(["v": value]),
            policy: policy,
            durable: durable,
            posted: self.clock,
            ticket: ticket,
            weight: weight
        )
        switch self.inbox.posted(post, self.reception, next: &self.next) {
        case .waits: return []
        case .answered(let answer, let burst):
            return self.record([.answer([(ticket, answer)])] + (burst.isEmpty ? [] : [.send(burst)]))
        }
    }

    mutating func flush() -> [String] { self.record(self.inbox.flush(self.reception, next: &self.next)) }

    /// The app, suspended, is posted `kinds` (count policy) and holds them once they are on disk; it is then left
    /// running, as a wake leaves it, without the wake's input.
    mutating func held(_ kinds: String...) {
        self.reception = Self.suspended
        for (index, kind) in kinds.enumerated() { _ = self.post("h\(index)", kind) }
        _ = self.flush()
        _ = self.written()
        self.reception = Self.running
    }

    /// The store keeps the write.
    mutating func written() -> [String] {
        let count = self.pending.count { if case .delivery = $0 { true } else { false } }
        let ids = (0..<count).map { self.nextID + Int64($0) }
        self.nextID += Int64(count)
        self.pending = []
        return self.record(self.inbox.written(ids: ids, self.reception, next: &self.next))
    }

    mutating func refused() -> [String] {
        self.pending = []
        return self.record(self.inbox.writeFailed(self.reception, next: &self.next))
    }

    /// The app, suspended, has a write of its post `p1` of `mail` with the store, and `p2` of `mail` waits.
    mutating func writingWhileSuspended() {
        self.reception = Self.suspended
        _ = self.post("p1", "mail")
        _ = self.flush()
        _ = self.post("p2", "mail")
    }

    /// Waiting posts join the write with the store when `store` takes the change, which the store's rows follow.
    mutating func join(_ store: (TestInbox.Amended) -> Bool) -> [String] {
        var taken: TestInbox.Amended?
        let actions = self.inbox.join(self.reception) { change in
            guard store(change) else { return false }
            taken = change
            return true
        }
        if let taken { self.pending = Array(self.pending.prefix(taken.kept)) + taken.added }
        return self.record(actions)
    }

    mutating func woke() -> [String] { self.record(self.inbox.woke(self.reception, next: &self.next)) }
    mutating func retry() -> [String] { self.record(self.inbox.retry(self.reception, next: &self.next)) }
    mutating func ack(_ seq: UInt64) -> [String] {
        self.record(self.inbox.acknowledged(upTo: seq, self.reception, next: &self.next))
    }

    private mutating func record(_ actions: [TestInbox.Action]) -> [String] {
        actions.flatMap { action -> [String] in
            switch action {
            case .write(let rows):
                self.pending = rows
                return ["write[" + rows.map(Self.describe).joined(separator: ", ") + "]"]
            case .send(let burst):
                return ["send[" + burst.map { "\($0.seq):\($0.event.kind)×\($0.event.count)\($0.id == nil ? "v" : "")" }
                    .joined(separator: ", ") + "]"]
            case .answer(let answers):
                return answers.map { ticket, answer in
                    switch answer {
                    case .sent: "\(ticket) sent"
                    case .held: "\(ticket) held"
                    case .refused: "\(ticket) refused"
                    case .storeFailed: "\(ticket) failed"
                    }
                }
            case .forget(let ids): return ["forget\(ids)"]
            case .retryLater: return ["retry"]
            }
        }
    }

    static func describe(_ row: TestInbox.Row) -> String {
        switch row {
        case .hold(let kind, let position, let slot): "hold \(kind)×\(slot.count)@\(position)"
        case .enqueue(let kind, let entry): "enqueue \(kind)#\(entry.serial)"
        case .dropQueued(let kind, let before): "drop \(kind)<\(before)"
        case .clearHeld: "clear"
        case .delivery(let event): "deliver \(event.kind)×\(event.count)"
        case .baseline(let kind, _): "baseline \(kind)"
        }
    }

    /// Held kinds with their counts, as GetQueue shows them.
    var held: [String] { self.inbox.held.kinds.map { "\($0)×\(self.inbox.held.count(of: $0))" } }
}

/// Every delivery rule of ``Inbox``, one short case each.
@Suite struct InboxTests {
    @Test func aPostToAnAppThatReceivesIsSentOnceItIsOnDisk() {
        var app = InboxHarness()
        #expect(app.post("p1", "mail") == [])
        #expect(app.flush() == ["write[deliver mail×1]"])
        #expect(app.written() == ["p1 sent", "send[1:mail×1]"])
        #expect(app.inbox.outstanding == 1, "sent and not acknowledged")
    }

    @Test func aWeightedPostSentAtOnceIsAnEventOfThatCount() {
        var app = InboxHarness()
        _ = app.post("p1", "log", weight: 40)
        #expect(app.flush() == ["write[deliver log×40]"])
        #expect(app.written() == ["p1 sent", "send[1:log×40]"], "one event standing for 40 occurrences")
        #expect(app.post("p2", "cursor", durable: false, weight: 3) == ["p2 sent", "send[2:cursor×3v]"])
    }

    @Test func weightedPostsToASuspendedAppAddUpInTheHeldCount() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "log", 0, .latest, weight: 40)
        _ = app.post("p2", "log", 0, .latest, weight: 2)
        #expect(app.flush() == ["write[hold log×42@0]"])
        #expect(app.written() == ["p1 held", "p2 held"])
        #expect(app.held == ["log×42"])
    }

    @Test func aPostToASuspendedAppIsHeldAndCoalescedByItsPolicy() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "mail")
        _ = app.post("p2", "mail")
        _ = app.post("p3", "badge", 2, .sum(field: "v"))
        #expect(app.flush() == ["write[hold mail×2@0, hold badge×1@1]"], "one row per kind, as the kind stands last")
        #expect(app.held == ["mail×2", "badge×1"], "as the write leaves them; answered once it is on disk")
        #expect(app.written() == ["p1 held", "p2 held", "p3 held"])
        #expect(app.held == ["mail×2", "badge×1"])
    }

    @Test func aPolicyRefusalIsAnsweredAtOnceAndWritesNothing() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "badge", 1, .sum(field: "unread"))
        #expect(app.flush() == ["p1 refused"], "a sum needs a number in its field")
        #expect(app.held == [])
    }

    @Test func aVolatilePostIsDecidedAtOnceWhenNothingWaits() {
        var app = InboxHarness()
        #expect(app.post("p1", "cursor", durable: false) == ["p1 sent", "send[1:cursor×1v]"])
        app.reception = InboxHarness.suspended
        #expect(app.post("p2", "cursor", durable: false) == ["p2 held"])
        #expect(app.held == ["cursor×1"], "in memory only")
    }

    @Test func aVolatilePostWaitsBehindAStoredOne() {
        var app = InboxHarness()
        _ = app.post("p1", "mail")
        _ = app.post("p2", "cursor", durable: false)
        #expect(app.flush() == ["write[deliver mail×1]"], "the volatile one is not stored")
        #expect(app.written() == ["p1 sent", "p2 sent", "send[1:mail×1, 2:cursor×1v]"], "in the order posted")
    }

    @Test func oneWriteAtATimePostsMeanwhileWaitForItsAnswer() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "mail")
        #expect(app.flush() == ["write[hold mail×1@0]"])
        _ = app.post("p2", "mail")
        #expect(app.flush() == [], "the first is still with the store")
        #expect(app.written() == ["p1 held", "write[hold mail×2@0]"], "answered, then the next write, made from disk")
        #expect(app.written() == ["p2 held"])
        #expect(app.held == ["mail×2"])
    }

    @Test func postsThatComeBeforeTheStoreBeginsTheWriteJoinIt() {
        var app = InboxHarness()
        app.writingWhileSuspended()
        _ = app.post("p3", "badge", 1, .sum(field: "unread"))
        var change: TestInbox.Amended?
        #expect(app.join { change = $0; return true } == ["p3 refused"])
        #expect(change?.kept == 0, "the kind's row is written again")
        #expect(change?.added.map(InboxHarness.describe) == ["hold mail×2@0"], "one write for both")
        #expect(app.written() == ["p1 held", "p2 held"])
        #expect(app.held == ["mail×2"])
    }

    @Test func postsSentThatJoinAWriteAddTheirDeliveriesAfterItsRows() {
        var app = InboxHarness()
        _ = app.post("p1", "mail")
        _ = app.flush()
        _ = app.post("p2", "badge")
        var change: TestInbox.Amended?
        _ = app.join { change = $0; return true }
        #expect(change?.kept == 1)
        #expect(change?.added.map(InboxHarness.describe) == ["deliver badge×1"])
        #expect(app.written() == ["p1 sent", "p2 sent", "send[1:mail×1, 2:badge×1]"])
    }

    @Test func postsThatFindTheWriteBegunWaitForItsAnswer() {
        var app = InboxHarness()
        app.writingWhileSuspended()
        #expect(app.join { _ in false } == [])
        #expect(app.written() == ["p1 held", "write[hold mail×2@0]"])
    }

    @Test func aRefusedWriteFailsItsPostsAndLeavesMemoryAsTheDisk() {
        var app = InboxHarness()
        app.writingWhileSuspended()
        #expect(app.refused() == ["p1 failed", "write[hold mail×1@0]"], "the next write counts p2 alone")
        #expect(app.held == ["mail×1"], "p1 taken back: what p2's write leaves")
        #expect(app.written() == ["p2 held"])
        #expect(app.held == ["mail×1"])
    }

    @Test func aDurablePostToAQueueKindWritesOneRowForItsEntryWhateverTheQueueHolds() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        for number in 1...3 { _ = app.post("p\(number)", "log", Double(number), .queue(bound: 2)) }
        #expect(
            app.flush() == ["write[enqueue log#1, enqueue log#2, enqueue log#3, hold log×3@0, drop log<2]"],
            "an entry row per post, the kind's slot, and the oldest past the bound dropped"
        )
        _ = app.written()
        _ = app.post("p4", "log", 4, .queue(bound: 2))
        #expect(app.flush() == ["write[enqueue log#4, hold log×4@0, drop log<3]"], "one entry row, not the queue again")
        _ = app.written()
        #expect(app.inbox.held.entries(of: try! EventKind("log")).map(\.serial) == [3, 4])
    }

    @Test func aVolatilePostToAQueueKindWritesNoEntry() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "log", 1, .queue(bound: 5))
        _ = app.flush()
        _ = app.written()
        #expect(app.post("p2", "log", 2, .queue(bound: 5), durable: false) == ["p2 held"], "in memory only")
        _ = app.post("p3", "log", 3, .queue(bound: 5))
        #expect(app.flush() == ["write[enqueue log#3, hold log×3@0]"])
    }

    @Test func aRefusedWriteTakesBackTheEntriesItAddedAndDropped() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        for number in 1...2 { _ = app.post("p\(number)", "log", Double(number), .queue(bound: 2)) }
        _ = app.flush()
        _ = app.written()
        let log = try! EventKind("log")
        let before = app.inbox.footprint
        _ = app.post("p3", "log", 3, .queue(bound: 2))
        _ = app.flush()
        #expect(app.inbox.held.entries(of: log).map(\.serial) == [2, 3], "as the write leaves it")
        #expect(app.refused() == ["p3 failed"])
        #expect(app.inbox.held.entries(of: log).map(\.serial) == [1, 2], "the dropped entry is back")
        #expect(app.inbox.held.count(of: log) == 2 && app.inbox.footprint == before)
        _ = app.post("p4", "log", 4, .queue(bound: 2))
        #expect(app.flush() == ["write[enqueue log#3, hold log×3@0, drop log<2]"], "numbered as if p3 never came")
    }

    @Test func postsThatFindTheWriteBegunLeaveWhatIsHeldAsTheWriteLeavesIt() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "log", 1, .queue(bound: 2))
        _ = app.flush()
        _ = app.post("p2", "log", 2, .queue(bound: 2))
        _ = app.post("p3", "log", 3, .queue(bound: 2))
        #expect(app.join { _ in false } == [])
        #expect(app.inbox.held.entries(of: try! EventKind("log")).map(\.serial) == [1], "the joiners wait, and hold nothing yet")
        #expect(app.written() == ["p1 held", "write[enqueue log#2, enqueue log#3, hold log×3@0, drop log<2]"])
    }

    @Test func aWakeDeliversWhatWasHeldOneEventPerKindAfterItIsOnDisk() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        for (index, kind) in ["mail", "badge", "mail"].enumerated() { _ = app.post("p\(index)", kind) }
        _ = app.flush()
        _ = app.written()
        app.next = 10  // the wake's callbacks took numbers up to 9
        app.reception = InboxHarness.running
        #expect(app.woke() == ["write[clear, deliver mail×2, deliver badge×1]"])
        #expect(app.held == [], "as the delivery leaves it; sent once it is on disk")
        #expect(app.written() == ["send[10:mail×2, 11:badge×1]"], "numbered after the callbacks")
        #expect(app.held == [])
    }

    @Test func whatWasHeldGoesBeforeAPostSentAfterIt() {
        var app = InboxHarness()
        app.held("mail")
        _ = app.post("p2", "badge")
        #expect(app.flush() == ["write[clear, deliver mail×1, deliver badge×1]"])
        #expect(app.written() == ["p2 sent", "send[1:mail×1, 2:badge×1]"])
    }

    @Test func aRefusedWakeHoldsLaterPostsBehindItUntilARetryDeliversBoth() {
        var app = InboxHarness()
        app.held("earlier")
        #expect(app.woke() == ["write[clear, deliver earlier×1]"])
        _ = app.post("later", "later")
        #expect(app.refused() == ["retry", "write[hold later×1@1]"], "held behind what was held")
        #expect(app.written() == ["later held"])
        #expect(app.held == ["earlier×1", "later×1"])
        #expect(app.retry() == ["write[clear, deliver earlier×1, deliver later×1]"])
        #expect(app.written() == ["send[1:earlier×1, 2:later×1]"], "the earlier first")
    }

    @Test func aRefusedDeliveryWaitsForTheNextWakeOfAnAppThatStoppedReceiving() {
        var app = InboxHarness()
        app.held("mail")
        _ = app.woke()
        #expect(app.refused() == ["retry"])
        app.reception = InboxHarness.suspended
        #expect(app.retry() == [], "an app that does not receive gets it with its next wake")
        app.reception = InboxHarness.running
        #expect(app.woke() == ["write[clear, deliver mail×1]"])
    }

    @Test func aNewStreamGetsWhatWasNotAcknowledgedAgainRenumberedFirst() {
        var app = InboxHarness()
        _ = app.post("p1", "mail")
        _ = app.flush()
        #expect(app.written() == ["p1 sent", "send[1:mail×1]"])
        app.inbox.attached()
        app.next = 5
        #expect(app.woke() == ["send[5:mail×1]"])
        #expect(app.ack(4) == [], "the old number no longer counts")
        #expect(app.ack(5) == ["forget[1]"])
    }

    @Test func anAppThatLagsHasItsPostsHeldAndGetsThemWhenItCatchesUp() {
        var app = InboxHarness()
        let bound = TestInbox.maximumUnacknowledged
        for index in 0..<(bound + 2) { _ = app.post("p\(index)", "tick") }
        let write = app.flush()
        #expect(write.count == 1)
        let answers = app.written()
        #expect(answers.count { $0.hasSuffix(" sent") } == bound)
        #expect(answers.count { $0.hasSuffix(" held") } == 2)
        #expect(app.held == ["tick×2"])
        #expect(app.ack(UInt64(bound / 2)) == ["forget\(Array(1...Int64(bound / 2)))"], "still at half or more")
        #expect(app.ack(UInt64(bound / 2 + 1)) == ["forget[\(bound / 2 + 1)]", "write[clear, deliver tick×2]"])
    }

    @Test func anAppThatDoesNotReadItsStreamHasItsPostsHeld() {
        var app = InboxHarness()
        app.reception = Reception(runs: true, attached: true, keepsUp: false)
        _ = app.post("p1", "mail")
        #expect(app.flush() == ["write[hold mail×1@0]"])
    }

    @Test func netChangeStoresItsBaselineAndAWakeSkipsAnUnchangedValue() {
        var app = InboxHarness()
        _ = app.post("p1", "sky", 1, .netChange)
        #expect(app.flush() == ["write[baseline sky, deliver sky×1]"])
        _ = app.written()
        app.reception = InboxHarness.suspended
        _ = app.post("p2", "sky", 2, .netChange)
        _ = app.post("p3", "sky", 1, .netChange)
        _ = app.flush()
        _ = app.written()
        app.reception = InboxHarness.running
        #expect(app.woke() == ["write[clear]"], "back where it was: nothing to deliver")
    }

    @Test func aVolatileKindHeldIsDeliveredButNeverStored() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "cursor", durable: false)
        _ = app.post("p2", "mail")
        _ = app.flush()
        _ = app.written()
        app.reception = InboxHarness.running
        #expect(app.woke() == ["write[clear, deliver mail×1]"])
        #expect(app.written() == ["send[1:cursor×1v, 2:mail×1]"])
        #expect(app.inbox.unacknowledged.map(\.seq) == [2], "a volatile event is never sent again")
    }

    @Test func eventsStoredByAnEarlierRunGoOutFirstOnWaking() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        app.inbox.restore(TestInbox.Stored(id: 7, event: Event(kind: try! EventKind("old"), payload: nil, count: 1, firstPosted: 0, lastPosted: 0)))
        _ = app.post("p1", "mail")
        _ = app.flush()
        _ = app.written()
        app.reception = InboxHarness.running
        #expect(app.woke() == ["send[1:old×1]", "write[clear, deliver mail×1]"])
    }

    @Test func aNewKindsRowIsPlacedAfterTheKindsHeld() {
        var app = InboxHarness()
        app.reception = InboxHarness.suspended
        _ = app.post("p1", "a")
        _ = app.flush()
        _ = app.written()
        _ = app.post("p2", "b")
        _ = app.post("p3", "a")
        #expect(app.flush() == ["write[hold b×1@1, hold a×2@0]"])
    }
}
