import CoalesceCore
import CoalesceStore
import Logging
import Synchronization
import Varlink

// The Notifications interface's calls on the center: who may act for an app, its requests, its delivered list and
// badge.
extension NotificationCenter {
    // MARK: Who may act for an app

    /// The app named, if the caller may act for it: its user, root, the daemon's user or the admin group.
    func authorize(_ name: String, _ peer: VarlinkPeer?) throws(NotificationError) -> (app: AppName, snapshot: AppManager.Snapshot) {
        let snapshot: AppManager.Snapshot
        do { snapshot = try self.apps.get(name) } catch { throw .unknownApp(app: name) }
        guard let peer,
            peer.uid == snapshot.registration.owner || Authorization.isAdmin(peer, group: self.daemon.configuration.adminGroup)
        else { throw .notAllowed(app: name) }
        return (snapshot.registration.name, snapshot)
    }

    // MARK: Requests

    /// Schedules a request; `completion` hears its next fire date (the date it fired at, for one that fired at
    /// once).
    func schedule(
        app name: String,
        request value: JSONValue,
        peer: VarlinkPeer?,
        completion: @escaping @Sendable (Result<WallTime, NotificationError>) -> Void
    ) throws(NotificationError) {
        let (app, _) = try self.authorize(name, peer)
        let request: AlertRequest
        do {
            request = try NotificationWire.request(value, zones: self.zones)
        } catch {
            throw .invalidRequest(app: name, id: value.objectValue?["id"]?.stringValue ?? "", reason: error.description)
        }
        let limit = self.daemon.configuration.notifications.maxContentSize
        let size = request.content.size
        guard size <= limit else {
            throw .invalidRequest(
                app: name, id: request.id,
                reason: "the content takes \(size) bytes, more than the \(limit) of [Notifications] MaxContentSize="
            )
        }
        self.perform({ state, now, step throws(NotificationError) in
            // What it would take in the store, against its owner's quota: refused before anything changes.
            let key = AlertKey(app: app, id: request.id)
            let growth = NotificationWire.storeText(AlertRecord(key: key, request: request, since: now.wall)).utf8.count
                - (state.requestBytes[key] ?? 0)
            if let quota = self.apps.notificationQuotaPassed(app, growth: growth) { throw .quotaExceeded(quota) }
            let actions: [AlertAction]
            do throws(AlertError) {
                actions = try state.scheduler.schedule(request, for: app, now: now)
            } catch {
                throw NotificationError(error, app: app, id: request.id)
            }
            let next = state.scheduler.next(of: AlertKey(app: app, id: request.id), now: now)
            self.apply(actions, to: &state, &step)
            if Self.followsZone(request) { step.watchesZone = true }
            return next ?? step.presentations.last?.0.date ?? now.wall
        }, completion: completion)
    }

    /// Cancels the app's requests of these ids, or all of them; `completion` hears how many were pending.
    func cancel(
        app name: String,
        ids: [String]?,
        peer: VarlinkPeer?,
        completion: @escaping @Sendable (Result<Int, NotificationError>) -> Void
    ) throws(NotificationError) {
        let (app, _) = try self.authorize(name, peer)
        self.perform({ state, now, step in
            let before = state.scheduler.pendingCount(of: app)
            let actions = ids.map { state.scheduler.cancel($0, of: app, now: now) } ?? state.scheduler.cancelAll(of: app, now: now)
            self.apply(actions, to: &state, &step)
            return before - state.scheduler.pendingCount(of: app)
        }, completion: completion)
    }

    func pending(app name: String, peer: VarlinkPeer?) throws(NotificationError) -> [PendingAlert] {
        let (app, _) = try self.authorize(name, peer)
        let now = AlertTimer.now()
        return self.state.withLock { $0.scheduler.pending(of: app, now: now) }
    }

    // MARK: Delivered list and badge

    func delivered(app name: String, peer: VarlinkPeer?) throws(NotificationError) -> (entries: [Delivered], dropped: Int64, badge: Int) {
        let (app, _) = try self.authorize(name, peer)
        return self.state.withLock { state in
            let alerts = state.apps[app] ?? AppAlerts()
            return (alerts.delivered, alerts.dropped, alerts.badge)
        }
    }

    /// The app's badge and delivered count, as System.GetApp shows them; without a check (the caller made it).
    func summary(of app: AppName) -> (badge: Int, delivered: Int, pending: Int) {
        self.state.withLock { state in
            let alerts = state.apps[app] ?? AppAlerts()
            return (alerts.badge, alerts.delivered.count, state.scheduler.pendingCount(of: app))
        }
    }

    /// Removes the app's delivered entries of these request ids, or all; `completion` hears how many went.
    func removeDelivered(
        app name: String,
        ids: [String]?,
        peer: VarlinkPeer?,
        completion: @escaping @Sendable (Result<Int, NotificationError>) -> Void
    ) throws(NotificationError) {
        let (app, _) = try self.authorize(name, peer)
        self.perform({ state, _, step in
            var alerts = state.apps[app] ?? AppAlerts()
            let wanted = ids.map(Set.init)
            let gone = alerts.delivered.filter { wanted?.contains($0.id) ?? true }
            guard !gone.isEmpty || wanted == nil else { return 0 }
            for entry in gone {
                step.change.undeliver.append((app.value, entry.serial))
                step.charges[app, default: 0] -= entry.bytes
            }
            alerts.delivered.removeAll { wanted?.contains($0.id) ?? true }
            if alerts.delivered.isEmpty { alerts.dropped = 0 }
            state.apps[app] = alerts
            step.touched.insert(app)
            if case .ends = state.interruptions.removed(gone.map(\.id), of: app) { step.endsInterruption.insert(app) }
            return gone.count
        }, completion: completion)
    }

    func setBadge(
        app name: String,
        badge: Int,
        peer: VarlinkPeer?,
        completion: @escaping @Sendable (Result<Void, NotificationError>) -> Void
    ) throws(NotificationError) {
        let (app, _) = try self.authorize(name, peer)
        self.perform({ state, _, step in
            state.apps[app, default: AppAlerts()].badge = max(0, badge)
            step.touched.insert(app)
        }, completion: completion)
    }
}

extension AlertContent {
    /// The bytes its texts, actions and user info take, as MaxContentSize= counts them.
    var size: Int {
        let texts = [self.title, self.subtitle, self.body, self.sound ?? "", self.threadID ?? "", self.categoryID ?? "", self.userInfo]
        return texts.reduce(0) { $0 + $1.utf8.count } + self.actions.reduce(0) { $0 + $1.id.utf8.count + $1.title.utf8.count }
    }
}
