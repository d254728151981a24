import CoalesceCore
import CoalesceStore
import Logging
import NIOCore
import Synchronization
import Systemd
import Varlink

/// Deciding and carrying out: every input is decided under the manager's lock, which guards memory only, and what it
/// decided is carried out after the lock is let go (``AppAction``), in the order decided across threads (``Outbox``).
///
/// Lock order: the notification center's lock may be held while this one is taken (its quota and owner checks go
/// with its decision); this one is never held while another is taken, besides the leaves that guard a value alone
/// (an ``EventWrite``'s rows, a responder's backlog, a quota account). Nothing here calls the store, a stream, a
/// process, systemd or the event loop while holding it.
extension AppManager {
    /// Runs `body` under the lock; what it decided is carried out once the lock is let go: its ordered actions
    /// through the outbox, and what needs no order across threads (the journal entries it wrote in `log`, the
    /// answers and the rest of what the inboxes decided, the lock's news) by this thread itself, so that a thread
    /// answering a whole write's posters does not leave that work to another that happens to be draining.
    func decide<T, Failure: Error>(
        _ body: (inout State, inout [LogEntry]) throws(Failure) -> T
    ) throws(Failure) -> T {
        var batch: [AppAction] = []
        var drains = false
        var own: [AppAction] = []
        defer {
            if drains { self.drain(&batch) }
            for action in own { self.perform(action) }
        }
        return try self.state.withLock { state throws(Failure) in
            var log: [LogEntry] = []
            defer {
                for entry in log { state.own.append(.log(entry)) }
                self.queueInboxActions(in: &state)
                state.kills.removeAll()
                if !state.screenLock.news.isEmpty {
                    state.own.append(.tellProtectedData(state.screenLock.news))
                    state.screenLock.news.removeAll()
                }
                drains = state.outbox.take(into: &batch)
                if !state.own.isEmpty { swap(&own, &state.own) }
            }
            return try body(&state, &log)
        }
    }

    /// Counts what the inboxes decided in this decision (telling monitors) and queues the rest of it.
    func queueInboxActions(in state: inout State) {
        guard !state.inboxActions.isEmpty else { return }
        let decided = state.inboxActions
        state.inboxActions.removeAll()
        for (appName, actions) in decided {
            self.countPostsAndTellMonitors(actions, of: appName, in: &state)
            state.own.append(.carryOut(appName, actions, failure: nil))
        }
    }

    /// Carries out `batch`, and then what other decisions queued meanwhile, until nothing is left.
    func drain(_ batch: inout [AppAction]) {
        repeat {
            for action in batch { self.perform(action) }
        } while self.state.withLock({ $0.outbox.next(after: &batch) })
    }

    func perform(_ action: AppAction) {
        switch action {
        case .send(let responder, let replies):
            responder.send(all: replies)
        case .sendEvents(let responder, let burst, let state):
            Self.send(burst, to: responder, state: state)
        case .finish(let responder, let reply):
            responder.finish(reply)
        case .endPark(let continuation, let end):
            continuation.resume(returning: end)
        case .answerLaunch(let waiters, let error):
            for waiter in waiters {
                if let error { waiter.resume(throwing: error) } else { waiter.resume() }
            }
        case .submit(let write, let together):
            if together { self.store.submitTogether(write) } else { self.store.submit(write) }
        case .hurryStore:
            self.store.hurry()
        case .recordState(let appName, let recorded):
            self.store.record(recorded, of: appName)
        case .carryOut(let appName, let actions, let failure):
            self.carryOut(actions, of: appName, failure: failure)
        case .tellProtectedData(let news):
            self.tellProtectedData(news)
        case .signal(let process, let signal):
            process.signal(signal)
        case .continueProcess(let process, let entry), .stopProcess(let process, let entry):
            let signal: ProcessSignal = if case .stopProcess = action { .stop } else { .continue }
            // Gone meanwhile: its stream's end says so.
            if process.signal(signal) { self.write(entry) }
        case .startTermination(let termination):
            termination.start()
        case .terminationAcknowledged(let termination):
            termination.acknowledged()
        case .unitCall(let appName, let call):
            self.call(call, for: appName)
        case .log(let entry):
            self.write(entry)
        case .arm(let timer, let delay, let decided):
            self.arm(timer, after: delay, from: decided)
        }
    }

    func write(_ entry: LogEntry) {
        self.logger.log(level: entry.level, "\(entry.message)", metadata: entry.metadata)
    }

    /// The action that arms `timer` to fire `delay` from now, or (`nil`) cancels it.
    func arming(_ timer: AppTimer, after delay: Duration?) -> AppAction {
        .arm(timer, after: delay, decided: self.eventLoop.now)
    }

    /// Arms `timer` to fire `delay` after `start`, in place of the one armed with its name; `nil` cancels it.
    func arm(_ timer: AppTimer, after delay: Duration?, from start: NIODeadline) {
        let scheduled = delay.map { delay in
            self.eventLoop.scheduleTask(deadline: start + .nanoseconds(delay.nanoseconds)) { self.fire(timer, after: delay) }
        }
        let replaced = self.timers.withLock { timers in
            scheduled.map { timers.updateValue($0, forKey: timer) } ?? timers.removeValue(forKey: timer)
        }
        replaced?.cancel()
    }

    private func fire(_ timer: AppTimer, after delay: Duration) {
        switch timer {
        case .deadline(let appName): self.deadlineReached(appName)
        case .suspensionDelay(let appName): self.suspensionDelayEnded(appName)
        case .reattach(let appName): self.reattachTimedOut(appName, timeout: delay)
        case .launch(let appName): self.launchTimedOut(appName, timeout: delay)
        case .unitRetry(let appName): self.retryUnit(appName)
        }
    }
}
