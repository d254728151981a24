import CoalesceCore
import Testing

/// The quota rule: a post that would take the app's events in memory past its allowance is refused, sent or held,
/// and what was refused takes nothing. Payloads here count 18 bytes (``Fields/size``); a slot 128 beyond them, a
/// queue entry or an event sent 32.
@Suite struct InboxQuotaTests {
    static let quota = Quota(name: "UserHeldBytes", limit: 400, uid: 1000)
    static func allowing(_ bytes: Int, runs: Bool) -> Reception {
        Reception(runs: runs, attached: true, allowance: Allowance(bytes: bytes, quota: Self.quota))
    }

    @Test func heldPostsPastTheAllowanceAreRefusedAndTakeNothing() {
        var app = InboxHarness()
        app.reception = Self.allowing(400, runs: false)
        for ticket in ["p1", "p2", "p3", "p4"] { _ = app.post(ticket, "chat", 0, .queue(bound: 100)) }
        // 178, 228, 278 after each; a fourth would need room for a new slot's worth (146) past 278.
        #expect(app.flush() == ["p4 refused", "write[enqueue chat#1, enqueue chat#2, enqueue chat#3, hold chat×3@0]"])
        #expect(app.written() == ["p1 held", "p2 held", "p3 held"])
        #expect(app.inbox.footprint == 278)
        #expect(app.inbox.held.count(of: try! EventKind("chat")) == 3)
    }

    @Test func eventsSentAndNotAcknowledgedCountUntilAcknowledged() {
        var app = InboxHarness()
        app.reception = Self.allowing(10_000, runs: true)
        _ = app.post("p1", "mail", 1, .latest)
        #expect(app.flush() == ["write[deliver mail×1]"])
        #expect(app.written() == ["p1 sent", "send[1:mail×1]"])
        #expect(app.inbox.footprint == 50)
        #expect(app.ack(1) == ["forget[1]"])
        #expect(app.inbox.footprint == 0)
    }

    @Test func aVolatilePostPastTheAllowanceIsRefusedNamingTheQuota() {
        var inbox = TestInbox(kindLimit: 8)
        var next: UInt64 = 1
        let post = TestInbox.Post(
            kind: try! EventKind("cursor"), payload: Fields(["x": 1]), policy: .latest, durable: false, posted: 1, ticket: "p1"
        )
        guard case .answered(.refused(.overQuota(let quota)), let burst) = inbox.posted(post, Self.allowing(100, runs: false), next: &next)
        else {
            Issue.record("not refused")
            return
        }
        #expect(quota == Self.quota && burst.isEmpty)
        #expect(inbox.held.isEmpty && inbox.footprint == 0)
        guard case .answered(.held, _) = inbox.posted(post, Self.allowing(146, runs: false), next: &next) else {
            Issue.record("not held within the allowance")
            return
        }
        #expect(inbox.footprint == 146)
    }
}
