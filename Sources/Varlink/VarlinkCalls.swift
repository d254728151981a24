import Synchronization

/// The streaming calls of a server, each a child task of the server's ``VarlinkServer/run()``: structured, so that
/// the server's run ends only once every call it started has ended, and a stopping server cancels them all.
///
/// Connections are served on event loops, which cannot add a child task to a group themselves: they hand each call
/// to the group through a stream that ``run()`` reads.
final class VarlinkCalls: Sendable {
    private let calls: AsyncStream<@Sendable () async -> Void>
    private let continuation: AsyncStream<@Sendable () async -> Void>.Continuation

    init() {
        (self.calls, self.continuation) = AsyncStream.makeStream()
    }

    /// Runs `call` as a child of ``run()``; `false` when the server has stopped and the call will not run.
    func start(_ call: @escaping @Sendable () async -> Void) -> Bool {
        if case .enqueued = self.continuation.yield(call) { return true }
        return false
    }

    /// Runs every call handed to ``start(_:)`` until ``finish()``, then cancels the calls still running and returns
    /// once they have all ended.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await call in self.calls {
                group.addTask { await call() }
            }
            group.cancelAll()
        }
    }

    /// No call starts any more; ``run()`` cancels the running ones and returns once they have ended.
    func finish() {
        self.continuation.finish()
    }
}

/// One streaming call, which its connection can cancel when the peer goes away: it runs beside a watcher for that,
/// in a group of two, and whichever ends first ends the other.
final class VarlinkCallScope: Sendable {
    private enum State {
        case open(waiter: CheckedContinuation<Void, Never>?)
        case cancelled
    }

    private let state = Mutex(State.open(waiter: nil))

    init() {}

    /// Runs `body` until it returns; ``cancel()`` cancels it.
    func run(_ body: @escaping @Sendable () async -> Void) async {
        // The watcher ends by throwing, which makes the group cancel the call; the error stops here.
        try? await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await body()
                self.cancel()  // the watcher's work is done
            }
            group.addTask {
                await self.cancelled()
                throw CancellationError()
            }
        }
    }

    /// The connection's peer is gone: the call is cancelled (a no-op once it has ended).
    func cancel() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .open(let waiter) = state else { return nil }
            state = .cancelled
            return waiter
        }
        waiter?.resume()
    }

    private func cancelled() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let already = self.state.withLock { state -> Bool in
                    guard case .open = state else { return true }
                    state = .open(waiter: waiter)
                    return false
                }
                if already { waiter.resume() }
            }
        } onCancel: {
            self.cancel()
        }
    }
}
