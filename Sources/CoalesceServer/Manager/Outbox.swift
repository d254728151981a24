/// What an owner of a lock decided and has yet to carry out, in the order it was decided, with one thread at a time
/// carrying it out (the drainer).
///
/// Decisions are made under the lock and their actions added here; the thread that finds no drainer when it lets go
/// takes the actions and carries them out, then comes back for what others added meanwhile, until none is left. A
/// thread that finds a drainer leaves its actions to it. So what reaches the world (a stream's replies, the store's
/// writes, a timer armed then cancelled) keeps the order of the decisions across threads, no lock is held while it
/// does, and an action whose carrying out decides again (a callback into the owner) queues behind it instead of
/// deadlocking.
///
/// Two buffers go round, the one being filled and the one being carried out, each keeping its room: a decision
/// allocates nothing for its actions once the daemon has run a while.
struct Outbox<Action: Sendable>: Sendable {
    private var queued: [Action] = []
    private var spare: [Action] = []
    private var draining = false

    var isEmpty: Bool { self.queued.isEmpty }

    /// Everything decided so far has been carried out: nothing is queued and no thread is carrying anything out.
    var isCarriedOut: Bool { self.queued.isEmpty && !self.draining }

    mutating func add(_ action: Action) {
        self.queued.append(action)
    }

    /// Where the next action added goes: a decision that must put one before what it queued since (``insert(_:at:)``).
    var end: Int { self.queued.count }

    /// Puts `action` before those added since `position` (an ``end`` read under the same hold of the lock).
    mutating func insert(_ action: Action, at position: Int) {
        self.queued.insert(action, at: position)
    }

    /// Makes the caller the drainer and hands it what is queued, unless there is nothing or another thread drains.
    /// - Parameter batch: empty; receives the actions to carry out.
    /// - Returns: whether the caller drains, and must call ``next(after:)`` until it says no more.
    mutating func take(into batch: inout [Action]) -> Bool {
        guard !self.draining, !self.queued.isEmpty else { return false }
        self.draining = true
        swap(&batch, &self.queued)
        swap(&self.queued, &self.spare)
        return true
    }

    /// The drainer carried out `batch`: hands it what was queued meanwhile, or, when nothing was, ends its turn.
    /// - Parameter batch: what was carried out; emptied here and refilled, or kept as the spare.
    /// - Returns: whether there is more to carry out.
    mutating func next(after batch: inout [Action]) -> Bool {
        batch.removeAll(keepingCapacity: true)
        guard !self.queued.isEmpty else {
            self.draining = false
            swap(&self.spare, &batch)
            return false
        }
        swap(&batch, &self.queued)
        return true
    }
}
