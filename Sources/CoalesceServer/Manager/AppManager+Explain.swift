import CoalesceCore
import CoalesceWire
import Synchronization

/// `coalescectl explain`: why an app is in its state and what it waits for, decided by the core
/// (``AppLifecycle/explanation(_:now:)``) from the app's lifecycle and what the manager knows of it besides.
extension AppManager {
    struct Explained: Sendable {
        var explanation: AppExplanation
        /// When it came to its state (seconds since the Unix epoch), and why.
        var since: Double
        var reason: TransitionReason?
    }

    /// - Parameter refreshes: its scheduled refreshes, as the ``RefreshScheduler`` has them.
    func explain(name: String, refreshes: [AppExplanation.RefreshFact] = []) throws(SystemError) -> Explained {
        let appName = try Self.systemAppName(name)
        let now = self.now()
        return try self.state.withLock { state throws(SystemError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            var facts = AppExplanation.Facts()
            facts.refreshes = refreshes
            for scene in record.scenes.scenes.values {
                switch scene.state {
                case .foregroundActive: facts.focusedScenes += 1
                case .foregroundInactive: facts.shownScenes += 1
                case .unattached, .background: break
                }
            }
            facts.interruptions = record.interruptions.causes.map(\.rawValue).sorted()
            let held = record.inbox.held
            facts.held = held.kinds.map { AppExplanation.HeldKind(kind: $0.value, posts: held.count(of: $0)) }
            let kinds = record.declarations.kinds.sorted { $0.key < $1.key }
            facts.wakingKinds = kinds.filter { $0.value.wakes == .background }.map(\.key.value)
            facts.launchingKinds = kinds.filter { $0.value.backgroundMode != nil }.map(\.key.value)
            facts.hold = record.suspension.held?.how
            if record.attachment == nil, let restored = record.restored { facts.unattachedPid = restored.process.pid }
            return Explained(explanation: record.lifecycle.explanation(facts, now: now), since: record.since, reason: record.reason)
        }
    }
}
