import CoalesceCore
import Synchronization

/// What an app's notifications take in memory (its pending requests and delivered entries, as the store keeps
/// them) counts against its owner's held-bytes quota and the daemon's ceiling, with its events: the notification
/// center charges the ledger here, under the manager's lock, as its own state changes.
extension AppManager {
    /// The quota that `growth` more bytes of the app's notifications would pass, if any; nothing is charged. `nil`
    /// also for an app not registered (the caller refuses that on its own).
    func notificationQuotaPassed(_ app: AppName, growth: Int) -> Quota? {
        guard growth > 0 else { return nil }
        return self.state.withLock { state -> Quota? in
            guard let account = state.records[app]?.account else { return nil }
            let allowance = state.ledger.allowance(account, footprint: 0)
            return growth > allowance.bytes ? allowance.quota : nil
        }
    }

    /// Charges the apps' owners with what their notifications take now more (or, negative, less). Never refused:
    /// a fire's presentation is kept over a quota, as held events are over a lowered one, and posts wait until
    /// there is room again.
    func chargeNotifications(_ changes: [AppName: Int]) {
        guard changes.contains(where: { $0.value != 0 }) else { return }
        self.state.withLock { state in
            for (app, change) in changes where change != 0 {
                guard let account = state.records[app]?.account else { continue }
                state.ledger.charge(account, change)
            }
        }
    }
}
