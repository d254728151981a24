import Logging
import NIOCore
import Synchronization

/// A connection's deferred replies as they are answered, from any thread: the event loop takes them in bulk, one
/// hop for all that came together; an answer given while its call is being dispatched is handed back to the
/// dispatch instead (the handler must not be re-entered, and a hop would cost more than the call).
final class VarlinkAnsweredReplies: Sendable {
    private struct State {
        var replies: [(id: Int, reply: VarlinkReply)] = []
        var scheduled = false
        /// The call being dispatched on the event loop, and its answer if it gave one meanwhile.
        var dispatching: Int?
        var immediate: VarlinkReply?
    }

    private let state = Mutex(State())
    private let eventLoop: any EventLoop
    let logger: Logger
    /// Where an undeclared failure's `InternalError` is named.
    let protocolErrorInterface: String
    private let deliver: NIOLoopBound<() -> Void>

    init(eventLoop: any EventLoop, logger: Logger, protocolErrorInterface: String, deliver: NIOLoopBound<() -> Void>) {
        self.eventLoop = eventLoop
        self.logger = logger
        self.protocolErrorInterface = protocolErrorInterface
        self.deliver = deliver
    }

    /// Takes the reply: it moves into the line rather than being copied under the lock.
    func add(id: Int, _ reply: consuming VarlinkReply) {
        var reply = Optional(reply)
        let schedule = self.state.withLock { state in
            if state.dispatching == id {
                state.immediate = reply.take()
                return false
            }
            state.replies.append((id, reply.take()!))  // set just above, taken once
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard schedule else { return }
        // Answered among others on this thread: woken once they all are.
        if let gathered = VarlinkAnswerGathering.current {
            gathered.connections.append(self)
            return
        }
        self.wake()
    }

    /// Has the event loop take the replies given so far.
    func wake() {
        let deliver = self.deliver
        self.eventLoop.execute { deliver.value() }
    }

    /// On the event loop: the replies given since the last time, swapped into `taken`, which must be empty. The
    /// two arrays go back and forth, each keeping its capacity: taking a copy and emptying ours allocated anew
    /// for every batch.
    func take(swapping taken: inout [(id: Int, reply: VarlinkReply)]) {
        self.state.withLock { state in
            swap(&state.replies, &taken)
            state.scheduled = false
        }
    }

    func startDispatch(_ id: Int) { self.state.withLock { $0.dispatching = id } }

    /// The dispatched call's answer, if it gave one while dispatched.
    func endDispatch() -> VarlinkReply? {
        self.state.withLock { state in
            state.dispatching = nil
            defer { state.immediate = nil }
            return state.immediate
        }
    }
}

/// One deferred call's reply on its way back: the whole of what answering it takes, one object per call.
final class VarlinkOwedReply: Sendable {
    private let id: Int
    private let method: String
    private let answered: VarlinkAnsweredReplies
    private let given = Atomic(false)

    init(id: Int, method: String, answered: VarlinkAnsweredReplies) {
        self.id = id
        self.method = method
        self.answered = answered
    }

    /// The first answer counts; later ones are dropped.
    func answer(_ reply: consuming VarlinkReply) {
        guard !self.given.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.answered.add(id: self.id, reply)
    }

    func fail(_ error: any Error) {
        guard !self.given.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let wire = VarlinkConnectionHandler.wireError(
            error,
            method: self.method,
            protocolErrorInterface: self.answered.protocolErrorInterface,
            logger: self.answered.logger
        )
        self.answered.add(id: self.id, VarlinkReply(error: wire))
    }
}
