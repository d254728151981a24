import CoalesceCore
import Logging
import Synchronization
import NIOCore
import Varlink

/// What the system around the apps does to them: sleep and wake interrupt the active app, and the clock, the
/// zone, the locale and the screen lock reach running apps as events (held, coalesced, while they are suspended);
/// the daemon's own events (`notification.`, `system.`, those `lifecycle.` kinds) are posted here.
extension AppManager {
    /// The system goes to sleep: the apps ``SleepInterruption/appsToInterrupt(_:)`` names are interrupted
    /// (willResignActive, reason `sleep`). Returns those told, with the numbers they acknowledge.
    func systemWillSleep() -> [SleepInterruption] {
        self.decide { state, log in
            var onScreen: [AppName: AppState] = [:]
            for appName in state.onScreen {
                if let record = state.records[appName] { onScreen[appName] = record.lifecycle.state }
            }
            var told: [SleepInterruption] = []
            for appName in SleepInterruption.appsToInterrupt(onScreen) {
                let before = state.records[appName]?.lifecycle.nextSequence
                self.interruption(.sleep, begins: true, of: appName, in: &state, log: &log)
                guard let record = state.records[appName], record.lifecycle.nextSequence != before else { continue }
                told.append(SleepInterruption(
                    app: appName,
                    sequence: record.lifecycle.nextSequence - 1,
                    attached: record.attachment != nil
                ))
            }
            return told
        }
    }

    /// The system woke: of the apps its sleep interrupted (`interrupted`), those still inactive for it become
    /// active again (didBecomeActive, reason `wake`); one something else took out of the foreground meanwhile is
    /// left. Returns those made active.
    @discardableResult
    func systemDidWake(_ interrupted: [AppName]) -> [AppName] {
        self.decide { state, log in
            var woken: [AppName] = []
            for appName in interrupted {
                guard state.records[appName]?.lifecycle.state == .inactive else { continue }
                self.interruption(.sleep, begins: false, of: appName, in: &state, log: &log)
                if state.records[appName]?.lifecycle.state == .active { woken.append(appName) }
            }
            return woken
        }
    }

    /// Waits until the app acknowledged every callback up to `sequence`, or `timeout` passed; returns whether it did.
    func waitForAcknowledgement(of app: AppName, sequence: UInt64, within timeout: Duration) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer = self.state.withLock { state -> Bool? in
                guard let record = state.records[app], record.attachment != nil else { return false }
                if record.lifecycle.acknowledgedUpTo >= sequence { return true }
                state.acknowledgementWaiters.add(app, sequence, continuation)
                return nil
            }
            if let answer {
                continuation.resume(returning: answer)
                return
            }
            self.eventLoop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
                let expired = self.state.withLock { state -> [CheckedContinuation<Bool, Never>] in
                    state.acknowledgementWaiters.take(of: app, upTo: sequence, expiring: true)
                }
                for waiter in expired { waiter.resume(returning: false) }
            }
        }
    }

    /// Posts one of the daemon's own events (`notification.*`) to an app, as a post from root: sent at once to an app
    /// that runs code, held for one that does not, each one kept (a queue). `finished` hears whether it was sent and
    /// what failed, once it is on disk.
    /// - Returns: false when no such app is registered.
    func postFromDaemon(
        _ app: AppName,
        kind: EventKind,
        payload: JSONValue,
        policy: CoalescingPolicy = .queue(bound: AppManager.daemonEventBound),
        finished: @escaping @Sendable (_ sent: Bool, (any Error)?) -> Void
    ) -> Bool {
        let post = Post(target: app.value, kind: kind, payload: EventPayload(payload), policy: policy)
        if case .enqueued = self.enqueuePost(app, post, poster: 0, finished: finished) { return true }
        return false
    }

    /// How many of one of the daemon's own kinds an app holds while it receives nothing; past it the oldest go,
    /// counted.
    static let daemonEventBound = 256

    /// Posts one of the daemon's own events to every running app: sent at once to those that receive, held
    /// (coalesced by `policy`) for the suspended. Returns how many apps it went to.
    @discardableResult
    func postToRunningApps(kind: EventKind, payload: JSONValue, policy: CoalescingPolicy) -> Int {
        let running = self.state.withLock { state in
            state.records.compactMap { $0.value.lifecycle.state.isRunning ? $0.key : nil }.sorted()
        }
        var posted = 0
        for app in running {
            let sent = self.postFromDaemon(app, kind: kind, payload: payload, policy: policy) { _, failure in
                if let failure {
                    self.logger.warning("\(app): \(kind) was not kept: \(failure)", metadata: ["app": "\(app)", "kind": "\(kind)"])
                }
            }
            if sent { posted += 1 }
        }
        return posted
    }

    static let protectedDataWillBecomeUnavailable = EventKind(daemonKind: "lifecycle.protectedDataWillBecomeUnavailable")
    static let protectedDataDidBecomeAvailable = EventKind(daemonKind: "lifecycle.protectedDataDidBecomeAvailable")

    /// The screen was locked (`available` false) or unlocked: apps that run code are told at once; a suspended app
    /// is told on its wake of the net change, so that a lock and an unlock while it slept come to nothing. Returns
    /// how many apps were told now.
    @discardableResult
    func protectedDataChanged(available: Bool) -> Int {
        let news = self.state.withLock { state -> [(AppName, Bool)] in
            state.screenLock.available = available
            var news: [(AppName, Bool)] = []
            for index in state.records.values.indices where state.records.values[index].lifecycle.receivesAtOnce {
                if state.records.values[index].tell(protectedDataAvailable: available) {
                    news.append((state.records.keys[index], available))
                }
            }
            return news
        }
        self.tellProtectedData(news)
        return news.count
    }

    func tellProtectedData(_ news: [(AppName, Bool)]) {
        for (app, available) in news {
            // Decided under the lock and posted after it: a later change decided meanwhile wins, and this one,
            // overtaken, is not sent after it.
            let current = self.state.withLock { $0.records[app]?.toldProtectedDataAvailable == available }
            guard current else { continue }
            let kind = available ? Self.protectedDataDidBecomeAvailable : Self.protectedDataWillBecomeUnavailable
            _ = self.postFromDaemon(app, kind: kind, payload: [:], policy: .latest) { _, failure in
                if let failure {
                    self.logger.warning("\(app): \(kind) was not kept: \(failure)", metadata: ["app": "\(app)", "kind": "\(kind)"])
                }
            }
        }
    }
}
