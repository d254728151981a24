@testable import CoalesceServer
import Synchronization
import Testing

/// The outbox that carries decisions out after a lock: one drainer at a time, in the order decided, a decision made
/// while draining queued behind what is being carried out.
@Suite struct OutboxTests {
    /// A lock owner in miniature: decisions add numbers under the lock; the drainer records them as it carries them
    /// out, and may decide again while it does (as an action that calls back into its owner does).
    final class Owner: Sendable {
        let state = TestMutex(Outbox<Int>())
        let carried = TestMutex<[Int]>([])
        /// Numbers whose carrying out decides these further numbers.
        let followUps: [Int: [Int]]

        init(followUps: [Int: [Int]] = [:]) { self.followUps = followUps }

        func decide(_ numbers: [Int]) {
            var batch: [Int] = []
            let drains = self.state.withLock { outbox in
                for number in numbers { outbox.add(number) }
                return outbox.take(into: &batch)
            }
            guard drains else { return }
            repeat {
                for number in batch {
                    self.carried.withLock { $0.append(number) }
                    if let more = self.followUps[number] { self.decide(more) }
                }
            } while self.state.withLock({ $0.next(after: &batch) })
        }
    }

    @Test func actionsAreCarriedOutInTheOrderDecided() {
        let owner = Owner()
        owner.decide([1, 2])
        owner.decide([])
        owner.decide([3])
        #expect(owner.carried.withLock { $0 } == [1, 2, 3])
        #expect(owner.state.withLock { $0.isEmpty })
    }

    @Test func aDecisionMadeWhileDrainingQueuesBehindWhatIsBeingCarriedOut() {
        // 1 decides 10 and 11 while 2 is still to be carried out: they come after 2, not before it, and nothing
        // deadlocks on the drainer's own thread.
        let owner = Owner(followUps: [1: [10, 11], 11: [20]])
        owner.decide([1, 2])
        #expect(owner.carried.withLock { $0 } == [1, 2, 10, 11, 20])
    }

    @Test func aThreadThatFindsADrainerLeavesItsActionsToIt() {
        var outbox = Outbox<Int>()
        var first: [Int] = []
        outbox.add(1)
        let drained1 = outbox.take(into: &first)
        #expect(drained1)
        #expect(first == [1])
        // Another decision while the first thread drains: it does not drain, its action waits.
        var second: [Int] = []
        outbox.add(2)
        let drained2 = outbox.take(into: &second)
        #expect(!drained2)
        #expect(second.isEmpty)
        // The drainer comes back for it, then ends its turn; the next decision drains again.
        let drained3 = outbox.next(after: &first)
        #expect(drained3)
        #expect(first == [2])
        let drained4 = outbox.next(after: &first)
        #expect(!drained4)
        outbox.add(3)
        let drained5 = outbox.take(into: &second)
        #expect(drained5)
        #expect(second == [3])
    }

    @Test func anActionInsertedAtAPositionGoesBeforeThoseAddedSince() {
        var outbox = Outbox<String>()
        outbox.add("earlier")
        let position = outbox.end
        outbox.add("callback")
        outbox.insert("continue", at: position)
        var batch: [String] = []
        let drained6 = outbox.take(into: &batch)
        #expect(drained6)
        #expect(batch == ["earlier", "continue", "callback"])
    }

    @Test func manyThreadsDecidingLoseNothingAndKeepEachThreadsOrder() async {
        let owner = Owner()
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    for index in 0..<200 { owner.decide([thread * 1000 + index]) }
                }
            }
        }
        let carried = owner.carried.withLock { $0 }
        #expect(carried.count == 8 * 200)
        for thread in 0..<8 {
            let mine = carried.filter { $0 / 1000 == thread }
            #expect(mine == mine.sorted())
        }
    }
}
