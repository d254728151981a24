import CoalesceCore

/// A suspended app is woken into the background for its events (seed 000: events are handled the next time the app
/// runs, in the foreground or the background): when it holds a post of a kind it declared `wakes: background`, it
/// is thawed or continued, its held events go out coalesced, and it runs on its background budget until it has
/// acknowledged them and closed its tasks (``AppLifecycle/wakeIntoBackground(now:)``).
extension AppManager {
    /// Wakes the app if it still holds what wakes it.
    func wakeForEvents(_ appName: AppName) {
        self.decide { state, log in
            guard let record = state.records[appName], Self.holdsWhatWakes(record) else { return }
            self.wake(appName, in: &state, log: &log)
        }
    }

    /// The one rule: a suspended app, attached, that holds an event of a kind it declared to wake it, is woken: held
    /// while it ran no code, or stored and not sent (decided while it ran, written once it no longer did). Asked
    /// where an event comes to wait for it: a volatile post answered at once, a write kept, a process attached.
    static func holdsWhatWakes(_ record: Record) -> Bool {
        guard record.lifecycle.state == .suspended, record.attachment != nil else { return false }
        return record.declarations.wake(forAnyOf: record.inbox.held.kinds)
            || record.declarations.wake(forAnyOf: record.inbox.undelivered.lazy.map(\.event.kind))
    }

    func wake(
        _ appName: AppName, reason: TransitionReason = .eventWake, budget: Duration? = nil, in state: inout State, log: inout [LogEntry]
    ) {
        let now = self.now()
        self.input(appName, in: &state, log: &log) { lifecycle in
            (try? lifecycle.wakeIntoBackground(now: now, reason: reason, budget: budget)) ?? []
        }
    }

    /// Wakes a suspended app into the background for what was just sent it (a notification's background action, a
    /// URL): it runs on its background budget until it has acknowledged what it holds. An app not suspended, or with
    /// no process attached to run it, is left as it is: what was sent waits for its next run.
    func wakeIntoBackground(_ appName: AppName, reason: TransitionReason) {
        self.decide { state, log in
            guard let record = state.records[appName], record.lifecycle.state == .suspended, record.attachment != nil
            else { return }
            self.wake(appName, reason: reason, in: &state, log: &log)
        }
    }
}
