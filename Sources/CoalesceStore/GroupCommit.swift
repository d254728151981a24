import Foundation
import GRDB

/// Group commit: writes that arrive while a transaction is being flushed wait, and then all of them go to disk in
/// the next transaction, one fsync for the batch. Each caller is answered once its batch is durable, so
/// durability does not cost an fsync per write, and a write that was answered is on disk.
///
/// One thread writes; every write runs in a savepoint of its own, so one that fails is undone alone and the others
/// in its batch still commit.
final class GroupCommit: Sendable {
    typealias Body = @Sendable (Database) throws -> Void

    private struct Pending {
        var body: Body
        var done: CheckedContinuation<Result<Void, StoreError>, Never>
    }

    private final class Queue: @unchecked Sendable {
        let condition = NSCondition()
        var pending: [Pending] = []
    }

    private let queue = Queue()

    init(pool: DatabasePool) {
        let queue = self.queue
        let thread = Thread {
            while true {
                queue.condition.lock()
                while queue.pending.isEmpty { queue.condition.wait() }
                let batch = queue.pending
                queue.pending.removeAll()
                queue.condition.unlock()
                Self.commit(batch, pool: pool)
            }
        }
        thread.name = "coalesced-store"
        thread.start()
    }

    /// Runs `body` in the next transaction and returns once that transaction is on disk.
    func write(_ body: @escaping Body) async throws(StoreError) {
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<Void, StoreError>, Never>) in
            self.queue.condition.withLock {
                self.queue.pending.append(Pending(body: body, done: done))
                self.queue.condition.signal()
            }
        }
        try result.get()
    }

    private static func commit(_ batch: [Pending], pool: DatabasePool) {
        var outcomes = [Result<Void, StoreError>](repeating: .success(()), count: batch.count)
        do {
            try pool.write { db in
                for (index, pending) in batch.enumerated() {
                    do {
                        try db.inSavepoint {
                            try pending.body(db)
                            return .commit
                        }
                    } catch {
                        outcomes[index] = .failure(StoreError("cannot write \(pool.path): \(error)"))
                    }
                }
            }
        } catch {
            let failure = StoreError("cannot commit to the store: \(error)")
            outcomes = outcomes.map { _ in .failure(failure) }
        }
        for (pending, outcome) in zip(batch, outcomes) { pending.done.resume(returning: outcome) }
    }
}
