import Foundation
import GRDB
import Synchronization

/// One write handed to the store: `wait()` returns once the transaction it went into is on disk.
public final class StoreCommit: Sendable {
    private struct State {
        var outcome: Result<Void, StoreError>?
        var waiter: CheckedContinuation<Result<Void, StoreError>, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Waits for the commit.
    /// - Throws: ``StoreError`` when the write or its transaction failed; nothing of it is on disk then.
    public func wait() async throws(StoreError) {
        let outcome = await withCheckedContinuation { (waiter: CheckedContinuation<Result<Void, StoreError>, Never>) in
            let ready = self.state.withLock { state -> Result<Void, StoreError>? in
                if let outcome = state.outcome { return outcome }
                state.waiter = waiter
                return nil
            }
            if let ready { waiter.resume(returning: ready) }
        }
        try outcome.get()
    }

    func finish(_ outcome: Result<Void, StoreError>) {
        let waiter = self.state.withLock { state in
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }
}

/// Group commit: writes that arrive while a transaction is being flushed wait, and then all of them go to disk in
/// the next transaction, one fsync for the batch. Each caller is answered once its batch is durable, so
/// durability does not cost an fsync per write, and a write that was answered is on disk. Writes are applied in
/// the order they were submitted.
///
/// One thread writes; every write runs in a savepoint of its own, so one that fails is undone alone and the others
/// in its batch still commit.
final class GroupCommit: Sendable {
    typealias Body = @Sendable (Database) throws -> Void

    private struct Pending {
        var body: Body
        var commit: StoreCommit
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

    /// Queues `body` for the next transaction; it returns at once.
    func submit(_ body: @escaping Body) -> StoreCommit {
        let commit = StoreCommit()
        self.queue.condition.withLock {
            self.queue.pending.append(Pending(body: body, commit: commit))
            self.queue.condition.signal()
        }
        return commit
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
            let failure = StoreError("cannot commit to \(pool.path): \(error)")
            outcomes = outcomes.map { _ in .failure(failure) }
        }
        for (pending, outcome) in zip(batch, outcomes) { pending.commit.finish(outcome) }
    }
}
