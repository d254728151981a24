import CoalesceCore
import Logging
import Synchronization
import Varlink

/// A scheduled refresh's run reaching its app (``RefreshScheduler`` decides when): its `lifecycle.backgroundRefresh`
/// event, and the app woken into the background for it on the refresh's own budget, or launched there.
extension AppManager {
    /// The app `name`, checked as the App interface checks an app acting for itself: registered, and `uid` its
    /// owner (or root).
    func actingFor(_ name: String, uid: UInt32) throws(AppError) -> AppName {
        let app = try Self.appName(name)
        try self.state.withLock { state throws(AppError) in _ = try self.appRecord(app, uid: uid, in: state) }
        return app
    }

    /// Sends the app its refresh: at once where it runs code; a suspended app is woken into the background for it,
    /// for `budget`; a stopped one is launched into the background (unless its launches are held back), and has it
    /// after its launch's callbacks. While the run lasts the app holds a background task for it ("refresh ID"), as
    /// BGAppRefreshTask keeps an app running until it is completed: the app is not suspended because it has
    /// acknowledged the event, only once it says the run is done (``refreshEnded(_:id:)``) or the budget runs out.
    func runRefresh(_ appName: AppName, id: String, budget: Duration) {
        // Whether the run can reach the app at all: an event is posted only for a run that can.
        let reachable = self.state.withLock { state -> Bool in
            guard let record = state.records[appName] else { return false }
            switch record.lifecycle.state {
            case .notRunning: return !record.lifecycle.launchesHeld
            case .suspended: return record.attachment != nil
            case .inactive, .active, .background: return true
            }
        }
        guard reachable else {
            self.logger.info(
                "\(appName): its refresh \(id) cannot reach it (its launches are held back, or its process has not attached)",
                metadata: ["app": "\(appName)", "refresh": "\(id)"]
            )
            return
        }
        let payload: JSONValue = ["id": .string(id), "budgetSec": .double(budget.seconds)]
        _ = self.postFromDaemon(appName, kind: RefreshScheduler.backgroundRefresh, payload: payload) { _, failure in
            if let failure {
                self.logger.warning("\(appName): its refresh \(id) was not kept: \(failure)", metadata: ["app": "\(appName)"])
            }
        }
        let launches = self.decide { state, log -> Bool in
            guard let record = state.records[appName] else { return false }
            switch record.lifecycle.state {
            case .suspended where record.attachment != nil:
                self.wake(appName, reason: .refresh, budget: budget, in: &state, log: &log)
                self.holdForRefresh(appName, id: id, in: &state)
                return false
            case .notRunning:
                // The hold begins as the launch is applied (``attach``), in the same decision.
                return !record.lifecycle.launchesHeld
            case .suspended:
                return false
            case .inactive, .active, .background:
                self.holdForRefresh(appName, id: id, in: &state)
                return false
            }
        }
        guard launches else { return }
        Task {
            do {
                _ = try await self.launch(name: appName.value, destination: .background, reason: .refresh(id: id))
            } catch {
                self.logger.warning("\(appName): could not launch it for its refresh \(id)", metadata: ["app": "\(appName)", "reason": "\(error)"])
            }
        }
    }

    /// The run of refresh `id` ended (the app said so, its budget ran out, it was cancelled): the background task it
    /// held the app by is ended, and the app suspended if nothing else keeps it running.
    func refreshEnded(_ appName: AppName, id: String) {
        self.decide { state, log in
            guard let task = state.records[appName]?.refreshTasks.removeValue(forKey: id) else { return }
            let now = self.now()
            // A task the lifecycle ended already (the budget ran out, the process went) is no longer there.
            self.input(appName, in: &state, log: &log) { lifecycle in (try? lifecycle.endBackgroundTask(task, now: now)) ?? [] }
        }
    }

    /// Begins the background task that holds the app for its refresh `id` (ending one it held for an earlier run).
    func holdForRefresh(_ appName: AppName, id: String, in state: inout State) {
        guard var record = state.records[appName], record.lifecycle.receivesAtOnce else { return }
        let now = self.now()
        guard let task = try? record.lifecycle.beginBackgroundTask(name: "refresh \(id)", now: now) else { return }
        if let previous = record.refreshTasks.updateValue(task.id, forKey: id) {
            _ = try? record.lifecycle.endBackgroundTask(previous, now: now)
        }
        self.reschedule(appName, &record, now: now, in: &state)
        state.records[appName] = record
    }
}
