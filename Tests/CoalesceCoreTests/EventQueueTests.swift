import CoalesceCore
import Testing

/// A payload for the core's tests: an object of named numbers.
struct Fields: CoalescablePayload {
    var members: [String: Double]

    init(_ members: [String: Double]) { self.members = members }

    func merged(with newer: Fields) -> Fields {
        Fields(self.members.merging(newer.members) { _, later in later })
    }

    func number(at field: String) -> Double? { self.members[field] }

    static func sum(_ sum: Double, at field: String) -> Fields { Fields([field: sum]) }

    /// As if each member took 16 bytes of JSON, in braces.
    var size: Int { 2 + 16 * self.members.count }
}

typealias Queue = EventQueue<Fields, Int>
typealias Event = CoalescedEvent<Fields, Int>

/// Each coalescing policy of DESIGN.md §3, pinned to its exact result.
@Suite struct EventQueueTests {
    let mail = try! EventKind("mail.received")
    let badge = try! EventKind("badge")
    let weather = try! EventKind("weather.temperature")
    let chat = try! EventKind("chat.message")

    @Test func latestKeepsTheLastPayloadAndTheCount() throws {
        var queue = Queue()
        for (index, id) in [1.0, 2, 3].enumerated() { try queue.post(self.mail, Fields(["id": id]), policy: .latest, at: 10 + index) }
        #expect(queue.drain() == [Event(kind: self.mail, payload: Fields(["id": 3]), count: 3, firstPosted: 10, lastPosted: 12)])
        #expect(queue.isEmpty, "a drained queue holds nothing")
    }

    @Test func firstKeepsTheFirstPayload() throws {
        var queue = Queue()
        for (index, id) in [1.0, 2, 3].enumerated() { try queue.post(self.mail, Fields(["id": id]), policy: .first, at: index) }
        #expect(queue.drain() == [Event(kind: self.mail, payload: Fields(["id": 1]), count: 3, firstPosted: 0, lastPosted: 2)])
    }

    @Test func countKeepsNothingButTheCount() throws {
        var queue = Queue()
        for index in 0..<1532 { try queue.post(self.mail, Fields(["line": Double(index)]), policy: .count, at: index) }
        #expect(queue.drain() == [Event(kind: self.mail, payload: nil, count: 1532, firstPosted: 0, lastPosted: 1531)])
    }

    @Test func sumAddsOneFieldLikeABadge() throws {
        var queue = Queue()
        try queue.post(self.badge, Fields(["unread": 2, "other": 9]), policy: .sum(field: "unread"), at: 1)
        try queue.post(self.badge, Fields(["unread": 3]), policy: .sum(field: "unread"), at: 2)
        try queue.post(self.badge, Fields(["unread": -1]), policy: .sum(field: "unread"), at: 3)
        #expect(queue.drain() == [Event(kind: self.badge, payload: Fields(["unread": 4]), count: 3, firstPosted: 1, lastPosted: 3)])
    }

    @Test func aSumPostWithoutItsNumberIsRefusedAndChangesNothing() throws {
        var queue = Queue()
        try queue.post(self.badge, Fields(["unread": 2]), policy: .sum(field: "unread"), at: 1)
        #expect(throws: PostRefusal.notANumber(kind: self.badge, field: "unread")) {
            try queue.post(self.badge, Fields(["read": 1]), policy: .sum(field: "unread"), at: 2)
        }
        #expect(throws: PostRefusal.notANumber(kind: self.mail, field: "n")) {
            try queue.post(self.mail, Fields([:]), policy: .sum(field: "n"), at: 2)
        }
        #expect(queue.kinds == [self.badge])
        #expect(queue.drain() == [Event(kind: self.badge, payload: Fields(["unread": 2]), count: 1, firstPosted: 1, lastPosted: 1)])
    }

    @Test func mergeLaysLaterMembersOverEarlierOnes() throws {
        var queue = Queue()
        try queue.post(self.weather, Fields(["temperature": 10, "wind": 3]), policy: .merge, at: 1)
        try queue.post(self.weather, Fields(["temperature": 12]), policy: .merge, at: 2)
        try queue.post(self.weather, Fields(["rain": 1]), policy: .merge, at: 3)
        #expect(
            queue.drain() == [
                Event(kind: self.weather, payload: Fields(["temperature": 12, "wind": 3, "rain": 1]), count: 3, firstPosted: 1, lastPosted: 3)
            ]
        )
    }

    @Test func netChangeDeliversNothingWhenTheValueCameBack() throws {
        var queue = Queue()
        queue.setBaseline(self.weather, Fields(["temperature": 10]))  // what the app knew when it was suspended
        try queue.post(self.weather, Fields(["temperature": 12]), policy: .netChange, at: 1)
        try queue.post(self.weather, Fields(["temperature": 10]), policy: .netChange, at: 2)
        #expect(queue.drain() == [], "back where it stood at suspension: no change to report")

        try queue.post(self.weather, Fields(["temperature": 11]), policy: .netChange, at: 3)
        try queue.post(self.weather, Fields(["temperature": 13]), policy: .netChange, at: 4)
        #expect(queue.drain() == [Event(kind: self.weather, payload: Fields(["temperature": 13]), count: 2, firstPosted: 3, lastPosted: 4)])
        // What was delivered is the new reference.
        try queue.post(self.weather, Fields(["temperature": 13]), policy: .netChange, at: 5)
        #expect(queue.drain() == [])
    }

    @Test func netChangeWithNothingDeliveredBeforeReportsTheLatest() throws {
        var queue = Queue()
        try queue.post(self.weather, Fields(["temperature": 10]), policy: .netChange, at: 1)
        #expect(queue.drain().map(\.payload) == [Fields(["temperature": 10])])
    }

    @Test func queueKeepsEveryEventUpToItsBoundThenAnOverflowMarker() throws {
        var queue = Queue()
        for index in 0..<7 { try queue.post(self.chat, Fields(["n": Double(index)]), policy: .queue(bound: 3), at: 100 + index) }
        #expect(
            queue.drain() == [
                Event(kind: self.chat, payload: Fields(["n": 4]), count: 1, firstPosted: 104, lastPosted: 104),
                Event(kind: self.chat, payload: Fields(["n": 5]), count: 1, firstPosted: 105, lastPosted: 105),
                Event(kind: self.chat, payload: Fields(["n": 6]), count: 1, firstPosted: 106, lastPosted: 106),
                Event(kind: self.chat, payload: nil, count: 4, firstPosted: 100, lastPosted: 106, dropped: 4),
            ]
        )
    }

    @Test func queueWithinItsBoundHasNoMarker() throws {
        var queue = Queue()
        for index in 0..<2 { try queue.post(self.chat, Fields(["n": Double(index)]), policy: .queue(bound: 3), at: index) }
        #expect(queue.drain().map(\.dropped) == [nil, nil])
    }

    @Test(arguments: [CoalescingPolicy.latest, .count, .first, .merge, .sum(field: "id")])
    func aPostsWeightIsCountedInItsKindsCount(_ policy: CoalescingPolicy) throws {
        var queue = Queue()
        try queue.post(self.mail, Fields(["id": 1]), policy: policy, at: 1, weight: 5)
        try queue.post(self.mail, Fields(["id": 2]), policy: policy, at: 2, weight: 3)
        try queue.post(self.mail, Fields(["id": 3]), policy: policy, at: 3)
        let events = queue.drain()
        #expect(events.map(\.count) == [9], "5 + 3 + 1 occurrences")
        #expect(events.map(\.firstPosted) == [1] && events.map(\.lastPosted) == [3])
        if case .sum = policy { #expect(events.map(\.payload) == [Fields(["id": 6])], "a weight counts, it does not multiply") }
    }

    @Test func aQueueKindKeepsEachPostAsOneEntryWhateverItsWeight() throws {
        var queue = Queue()
        for index in 0..<3 { try queue.post(self.chat, Fields(["n": Double(index)]), policy: .queue(bound: 10), at: index, weight: 7) }
        #expect(queue.entries(of: self.chat).map(\.serial) == [1, 2, 3])
        #expect(queue.count(of: self.chat) == 3)
        #expect(queue.drain().map(\.count) == [1, 1, 1])
    }

    @Test func oneEventPerKindInOrderOfEachKindsFirstPost() throws {
        var queue = Queue()
        try queue.post(self.mail, Fields(["id": 1]), policy: .latest, at: 1)
        try queue.post(self.badge, Fields(["unread": 1]), policy: .sum(field: "unread"), at: 2)
        try queue.post(self.weather, Fields(["temperature": 9]), policy: .latest, at: 3)
        try queue.post(self.mail, Fields(["id": 2]), policy: .latest, at: 4)
        try queue.post(self.badge, Fields(["unread": 1]), policy: .sum(field: "unread"), at: 5)
        let events = queue.drain()
        #expect(events.map(\.kind) == [self.mail, self.badge, self.weather])
        #expect(events.map(\.count) == [2, 2, 1])
    }

    @Test func aSlotKeepsThePolicyOfThePostThatOpenedIt() throws {
        var queue = Queue()
        try queue.post(self.mail, Fields(["id": 1]), policy: .first, at: 1)
        try queue.post(self.mail, Fields(["id": 2]), policy: .latest, at: 2)
        #expect(queue.policy(of: self.mail) == .first)
        #expect(queue.drain().map(\.payload) == [Fields(["id": 1])])
        // After a drain the next post opens a new slot with its own policy.
        try queue.post(self.mail, Fields(["id": 3]), policy: .latest, at: 3)
        #expect(queue.policy(of: self.mail) == .latest)
    }

    @Test func theNumberOfKindsHeldIsBounded() throws {
        var queue = Queue(kindLimit: 2)
        try queue.post(self.mail, Fields([:]), policy: .count, at: 1)
        try queue.post(self.badge, Fields([:]), policy: .count, at: 2)
        #expect(throws: PostRefusal.tooManyKinds(limit: 2)) { try queue.post(self.chat, Fields([:]), policy: .count, at: 3) }
        try queue.post(self.mail, Fields([:]), policy: .count, at: 4)  // a kind already held still folds
        #expect(queue.count(of: self.mail) == 2)
    }

    @Test func kindNamesFollowTheGrammar() throws {
        for good in ["mail", "mail.received", "a-b_c.9x", String(repeating: "a", count: 128)] {
            #expect(throws: Never.self) { try EventKind(good) }
        }
        let refusals: [(String, String)] = [
            ("", "empty"), ("Mail", "each label starts with a lower-case letter or digit"),
            ("mail..x", "empty label between dots"), ("mail.", "empty label between dots"),
            ("mail received", "only lower-case letters, digits, '-' and '_' between the dots"),
            (String(repeating: "a", count: 129), "longer than 128 bytes"),
            ("lifecycle.didBecomeActive", "only lower-case letters, digits, '-' and '_' between the dots"),
            ("lifecycle.x", "lifecycle.* kinds are the daemon's own"),
        ]
        for (bad, reason) in refusals {
            #expect(throws: EventKindError(kind: bad, reason: reason)) { try EventKind(bad) }
        }
    }

    @Test func policiesReadFromCommandLineText() throws {
        #expect(try CoalescingPolicy(parsing: "latest") == .latest)
        #expect(try CoalescingPolicy(parsing: "netChange") == .netChange)
        #expect(try CoalescingPolicy(parsing: "sum:unread") == .sum(field: "unread"))
        #expect(try CoalescingPolicy(parsing: "queue:10") == .queue(bound: 10))
        for bad in ["", "sum", "sum:", "queue:0", "queue:x", "latest:3", "newest"] {
            #expect(throws: PolicyTextError.self, "\(bad)") { try CoalescingPolicy(parsing: bad) }
        }
    }
}

/// Random posts across kinds and policies: whatever the sequence, a wake accounts for every post exactly once.
@Suite struct EventQueuePropertyTests {
    @Test(arguments: 0..<100) func everyPostIsAccountedForOnWake(seed: UInt64) throws {
        var random = LifecyclePropertyTests.SeededGenerator(state: seed)
        let kinds = try (0..<6).map { try EventKind("kind\($0)") }
        let policies: [CoalescingPolicy] = [.latest, .first, .count, .sum(field: "n"), .merge, .queue(bound: 4)]
        var queue = Queue()
        var posted: [EventKind: Int] = [:]
        var firstPost: [EventKind: Int] = [:]
        let posts = Int.random(in: 1...300, using: &random)
        for stamp in 0..<posts {
            let index = Int.random(in: 0..<kinds.count, using: &random)
            try queue.post(kinds[index], Fields(["n": Double(Int.random(in: -5...5, using: &random))]), policy: policies[index], at: stamp)
            posted[kinds[index], default: 0] += 1
            if firstPost[kinds[index]] == nil { firstPost[kinds[index]] = stamp }
        }
        let events = queue.drain()
        var counted: [EventKind: Int] = [:]
        for event in events { counted[event.kind, default: 0] += event.count }
        #expect(counted == posted, "every post counted once, none invented")
        // One event per kind (a queue kind: its events and at most one marker), kinds in order of first post.
        var seen: [EventKind] = []
        for event in events where seen.last != event.kind { seen.append(event.kind) }
        #expect(seen == posted.keys.sorted { firstPost[$0]! < firstPost[$1]! })
        #expect(events.filter { $0.kind != kinds[5] }.count == posted.keys.filter { $0 != kinds[5] }.count)
        #expect(events.filter { $0.kind == kinds[5] && $0.dropped == nil }.count <= 4, "a queue holds at most its bound")
        #expect(queue.isEmpty)
    }
}
