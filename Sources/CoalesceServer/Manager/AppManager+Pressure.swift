import CoalesceCore
import Logging
import Synchronization
import Systemd

/// Memory pressure's effects on the apps (the ``PressureMonitor`` decides when): didReceiveMemoryWarning to every app
/// that runs code, and purges of suspended apps in the order every purge takes them.
extension AppManager {
    /// Tells every app that runs code (inactive, active, in the background) didReceiveMemoryWarning; returns how many.
    @discardableResult
    func warnOfMemoryPressure() -> Int {
        self.decide { state, log in
            let running = state.records.keys.filter { state.records[$0]!.lifecycle.receivesAtOnce }
            for appName in running {
                self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.memoryWarning() }
            }
            return running.count
        }
    }

    /// The suspended apps in the order a purge takes them, with their resident bytes: the largest resident set
    /// first (``PurgeOrder``), for the operator's Purge and for memory pressure alike. Measured outside the lock: it
    /// reads /proc for every suspended app.
    func purgeCandidates() -> [(app: AppName, residentBytes: Int)] {
        let suspended = self.state.withLock { state in
            state.records.filter { $0.value.lifecycle.state == .suspended }.mapValues { $0.process?.handle }
        }
        let sizes = suspended.mapValues { $0?.residentBytes ?? 0 }
        return PurgeOrder.largestFirst(sizes).map { ($0, sizes[$0]!) }
    }

    /// Purges the suspended app with the largest resident set, without a callback, its journal entry carrying the
    /// pressure that made the daemon do it (`figures`); `nil` when no app is suspended.
    func purgeUnderPressure(_ figures: Logger.Metadata) -> (app: AppName, residentBytes: Int)? {
        for candidate in self.purgeCandidates() {
            let purged = self.decide { state, log -> Bool in
                // Still suspended now that the lock is held again.
                guard state.records[candidate.app]?.lifecycle.state == .suspended else { return false }
                let first = log.count
                let now = self.now()
                do {
                    try self.input(candidate.app, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                        try lifecycle.purge(now: now)
                    }
                } catch {
                    return false
                }
                for index in first..<log.count where log[index].metadata["message_id"] == "\(MessageID.purged)" {
                    log[index].message = "\(candidate.app): purged to reclaim memory under memory pressure"
                    log[index].metadata.merge(figures) { _, new in new }
                    log[index].metadata["resident_bytes"] = "\(candidate.residentBytes)"
                }
                return true
            }
            if purged { return candidate }
        }
        return nil
    }
}
