import CoalesceCore
import CoalesceStore
import Logging
import NIOCore
import Synchronization
import Varlink

/// Deciding and carrying out, as the manager does (`AppManager+Outbox`): the center's lock guards memory only, and
/// what a decision wants done is carried out once it is let go, by one thread at a time, in the order decided.
extension NotificationCenter {
    /// Runs `body` under the lock; what it queued in the state's outbox is carried out once the lock is let go.
    @discardableResult
    func decide<T, Failure: Error>(_ body: (inout State) throws(Failure) -> T) throws(Failure) -> T {
        var batch: [NotificationAction] = []
        var drains = false
        defer { if drains { self.drain(&batch) } }
        return try self.state.withLock { state throws(Failure) in
            defer { drains = state.outbox.take(into: &batch) }
            return try body(&state)
        }
    }

    private func drain(_ batch: inout [NotificationAction]) {
        repeat {
            for action in batch { self.perform(action) }
        } while self.state.withLock({ $0.outbox.next(after: &batch) })
    }

    private func perform(_ action: NotificationAction) {
        switch action {
        case .write(let change, let finished):
            self.store.write(change).whenFinished(finished)
        case .arm(let wall, let boot):
            self.timer.withLock { $0 }?.arm(wall: wall, boot: boot)
        case .watchZone:
            self.watchZone()
        case .armRate(let delay):
            let scheduled = delay.map { self.apps.eventLoop.scheduleTask(in: $0) { self.rateDue() } }
            let replaced = self.rateTimer.withLock { timer in
                defer { timer = scheduled }
                return timer
            }
            replaced?.cancel()
        case .send(let responder, let replies):
            responder.send(all: replies)
        }
    }
}
