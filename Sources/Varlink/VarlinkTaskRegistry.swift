import NIOConcurrencyHelpers

/// The streaming calls a server is running, so that shutdown can wait for them to end before the event loop they
/// report back to goes away.
final class VarlinkTaskRegistry: Sendable {
    private struct State {
        var nextKey = 0
        var running: [Int: Task<Void, Never>] = [:]
        /// Tasks that ended before they were registered.
        var endedEarly: Set<Int> = []
    }

    private let state = NIOLockedValueBox(State())

    /// Starts `body` as a task that is tracked until it ends.
    func start(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let key = self.state.withLockedValue { state in
            defer { state.nextKey += 1 }
            return state.nextKey
        }
        let task = Task {
            await body()
            self.state.withLockedValue { state in
                if state.running.removeValue(forKey: key) == nil { state.endedEarly.insert(key) }
            }
        }
        self.state.withLockedValue { state in
            if state.endedEarly.remove(key) == nil { state.running[key] = task }
        }
        return task
    }

    /// Cancels every running task and waits until all have ended.
    func cancelAndWait() async {
        let running = self.state.withLockedValue { Array($0.running.values) }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }
}
