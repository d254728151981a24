import CoalesceCore

/// Interruptions: the lock, a sleep and an operator's `Interrupt` each keep an app on screen from being active
/// (willResignActive), and it is active again (didBecomeActive) once the last of them has ended (``Interruptions``).
/// An app without scenes is interrupted as a whole; an app on screen through its windows has its focused scene
/// interrupted, and follows its scenes.
extension AppManager {
    /// One cause of an interruption begins or ends for `app`. An app that is not active when a cause begins is not
    /// interrupted by it, except one already interrupted, which then waits for this cause to end too.
    func interruption(_ cause: InterruptionCause, begins: Bool, of app: AppName, in state: inout State, log: inout [LogEntry]) {
        guard let record = state.records[app], record.lifecycle.state.isRunning else { return }
        let now = self.now()
        let reason = begins ? cause.beginning : cause.ending
        if !record.scenes.scenes.isEmpty {
            let effects = state.update(app) { record -> [SceneEffect] in
                let changes = begins ? record.interruptions.begin(cause) : record.interruptions.end(cause)
                return changes ? record.scenes.interruption(begins) : []
            } ?? []
            self.carryOutScenes(effects, of: app, reason: reason, in: &state, log: &log)
        } else if begins {
            guard record.lifecycle.interrupted || record.lifecycle.state == .active else { return }
            _ = state.update(app) { $0.interruptions.begin(cause) }
            guard !record.lifecycle.interrupted else { return }
            self.input(app, in: &state, log: &log) { lifecycle in (try? lifecycle.interruptionBegan(now: now, reason: reason)) ?? [] }
        } else {
            let ends = state.update(app) { $0.interruptions.end(cause) } ?? false
            guard ends, record.lifecycle.interrupted, record.lifecycle.state == .inactive else { return }
            self.input(app, in: &state, log: &log) { lifecycle in (try? lifecycle.interruptionEnded(now: now, reason: reason)) ?? [] }
        }
    }

    /// The seat's screen was locked (or unlocked). With `[System] LockInterrupts=`, the apps on screen are
    /// interrupted first (willResignActive, reason `lock`) until the unlock (didBecomeActive, reason `unlock`); then
    /// apps hear of their protected data (``protectedDataChanged(available:)``). Returns how many apps heard of it
    /// now.
    @discardableResult
    func screenLockChanged(locked: Bool) -> Int {
        self.screenLockInterrupts(locked: locked)
        return self.protectedDataChanged(available: !locked)
    }

    private func screenLockInterrupts(locked: Bool) {
        guard self.daemon.configuration.system.lockInterrupts else { return }
        self.decide { state, log in
            let apps = locked
                ? state.onScreen.sorted()
                : state.records.compactMap { $0.value.interruptions.causes.contains(.lock) ? $0.key : nil }.sorted()
            for app in apps { self.interruption(.lock, begins: locked, of: app, in: &state, log: &log) }
        }
    }
}
