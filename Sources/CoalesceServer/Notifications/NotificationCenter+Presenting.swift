import CoalesceCore
import CoalesceStore
import CoalesceWire
import Logging
import Synchronization
import Varlink

/// Presenting and answering: where a presentation goes (the journal always; an active app's stream for a banner;
/// the agents and the command otherwise, and for an alert, which also interrupts the active app), and what a
/// response does (the app's event, its launch, the end of an interruption).
extension NotificationCenter {
    static let willPresent = EventKind(daemonKind: "notification.willPresent")
    static let didReceiveResponse = EventKind(daemonKind: "notification.didReceiveResponse")

    /// Carries out a step once its write is on disk: presentations in order, then the drops, then what the journal
    /// says of fires missed.
    func carryOut(_ step: Step, reason: Reason) {
        var missed = 0
        var coalescedInto = 0
        let settings = self.daemon.configuration.notifications
        var forAgents: [(app: AppName, serial: Int64, owner: UInt32?, entry: JSONObject)] = []
        for (presentation, entry) in step.presentations {
            let owner = self.present(presentation, entry: entry, settings: settings)
            forAgents.append((presentation.app, entry["serial"]?.intValue ?? 0, owner, entry))
            if presentation.late {
                missed += presentation.count
                if presentation.count > 1 { coalescedInto += 1 }
            }
        }
        // Each agent gets the step's presentations in one write: a thousand due together are one burst.
        if !forAgents.isEmpty { self.tellAgents(forAgents) }
        var dropped = 0
        for drop in step.drops {
            dropped += drop.fires.count
            let why: String
            switch drop.reason {
            case .pastGrace(let grace): why = "later than their grace period of \(grace)"
            case .tooManyMissed(let limit, let through):
                why = "more than \(limit) missed at once; the rest through \(through) skipped"
            }
            self.logger.warning(
                "Missed notification fires dropped: \(why)",
                metadata: [
                    "message_id": "\(MessageID.notificationDropped)", "app": "\(drop.key.app)",
                    "notification": "\(drop.key.id)", "fires": "\(drop.fires.count)",
                ]
            )
        }
        if missed > 0 || dropped > 0, reason != .request {
            self.logger.notice(
                "\(missed + dropped) notification fires were missed \(reason.rawValue): \(missed) presented late (\(coalescedInto) of the presentations coalesce several), \(dropped) dropped by their late policy",
                metadata: ["presented": "\(missed)", "dropped": "\(dropped)"]
            )
        }
    }

    /// One presentation: the journal; then the app (willPresent, when active) or the desktop (the command; the
    /// agents of the owner returned, which the caller tells in one burst).
    private func present(_ presentation: AlertPresentation, entry: JSONObject, settings: NotificationSettings) -> UInt32? {
        let content = presentation.content
        var metadata: Logger.Metadata = [
            "message_id": "\(MessageID.notificationPresented)", "app": "\(presentation.app)",
            "notification": "\(presentation.id)", "title": "\(content.title)", "body": "\(content.body)",
            "style": "\(presentation.style.rawValue)", "count": "\(presentation.count)", "late": "\(presentation.late)",
        ]
        if let thread = content.threadID { metadata["thread"] = "\(thread)" }
        self.logger.notice("Notification: \(content.title)", metadata: metadata)

        let snapshot = try? self.apps.get(presentation.app.value)
        let active = snapshot?.state == .active
        if active {
            _ = self.apps.postFromDaemon(presentation.app, kind: Self.willPresent, payload: .object(entry)) { _, failure in
                if let failure { self.logger.error("notification.willPresent not kept: \(failure)", metadata: ["app": "\(presentation.app)"]) }
            }
        }
        guard !active || presentation.style == .alert else { return nil }
        if let state = snapshot?.state, AlertInterruptions.interrupts(style: presentation.style, appIn: state) {
            let change = self.state.withLock { $0.interruptions.presented(presentation.id, over: presentation.app) }
            if change == .begins(presentation.app) { _ = try? self.apps.interrupt(name: presentation.app.value, begins: true, cause: .alert) }
        }
        if let command = settings.command {
            var environment = [
                "COALESCED_APP": presentation.app.value, "COALESCED_NOTIFICATION": presentation.id,
                "COALESCED_TITLE": content.title, "COALESCED_SUBTITLE": content.subtitle, "COALESCED_BODY": content.body,
                "COALESCED_STYLE": presentation.style.rawValue, "COALESCED_COUNT": "\(presentation.count)",
                "COALESCED_LATE": presentation.late ? "1" : "0", "COALESCED_DATE": "\(presentation.date.seconds)",
                "COALESCED_SERIAL": "\(entry["serial"]?.intValue ?? 0)", "COALESCED_USER_INFO": content.userInfo,
            ]
            if let thread = content.threadID { environment["COALESCED_THREAD"] = thread }
            if let badge = content.badge { environment["COALESCED_BADGE"] = "\(badge)" }
            if let sound = content.sound { environment["COALESCED_SOUND"] = sound }
            self.commands.submit(CommandSink.Run(command: command, environment: environment, timeout: settings.commandTimeout), limit: settings.maxCommands)
        }
        return snapshot?.registration.owner
    }

    // MARK: Responses

    /// The most bytes a response's typed text may take: a reply a person types, not a document.
    static let maxResponseText = 4096

    /// The user's answer to a delivered notification: the app's event (held like any while it does not run code;
    /// on disk before this returns), then the notification taken off the delivered list, so that it is answered
    /// once (as iOS takes an answered notification out of Notification Center), the end of the alert's
    /// interruption, and the app launched or brought forward when the answer asks. A request pending and not
    /// presented, or whose presentation left the list, has nothing to answer.
    func respond(app name: String, id: String, action: String, text: String?, peer: VarlinkPeer?) async throws(NotificationError) {
        let (app, snapshot) = try self.authorize(name, peer)
        if let text, text.utf8.count > Self.maxResponseText {
            throw .invalidRequest(
                app: name, id: id,
                reason: "the text takes \(text.utf8.count) bytes, more than the \(Self.maxResponseText) a response's text may take"
            )
        }
        let key = AlertKey(app: app, id: id)
        // Found and claimed in one look: of two answers at once, one is taken and the other finds it answered.
        let (button, userInfo) = try self.state.withLock { state throws(NotificationError) -> (AlertButton?, JSONValue) in
            guard !state.answering.contains(key), let entry = state.apps[app]?.delivered.last(where: { $0.id == id })?.entry else {
                throw .unknownNotification(app: name, id: id)
            }
            let content = entry["content"]?.objectValue
            let buttons = (content?["actions"]?.arrayValue ?? []).compactMap { value -> AlertButton? in
                guard let object = value.objectValue, let id = object["id"]?.stringValue else { return nil }
                return AlertButton(id: id, title: object["title"]?.stringValue ?? id, foreground: object["foreground"]?.boolValue ?? false)
            }
            let button = buttons.first { $0.id == action }
            guard AlertButton.builtIn.contains(action) || button != nil else {
                throw .unknownAction(app: name, id: id, action: action)
            }
            state.answering.insert(key)
            return (button, content?["userInfo"] ?? .object([:]))
        }
        let payload = AlertResponseForm(id: id, action: action, text: text, userInfo: userInfo.jsonText).wire
        let posted = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, NotificationError>, Never>) in
            let taken = self.apps.postFromDaemon(app, kind: Self.didReceiveResponse, payload: .object(payload)) { _, failure in
                continuation.resume(returning: failure.map { .failure(Self.notKept($0)) } ?? .success(()))
            }
            if !taken { continuation.resume(returning: .failure(.unknownApp(app: name))) }
        }
        if case .failure(let error) = posted {
            self.state.withLock { _ = $0.answering.remove(key) }
            throw error
        }
        self.logger.notice(
            "Notification answered: \(action)",
            metadata: [
                "message_id": "\(MessageID.notificationAnswered)", "app": "\(app)", "notification": "\(id)",
                "action": "\(action)", "uid": "\(peer?.uid ?? 0)",
            ]
        )
        do {
            try await self.perform { state, _, step in
                state.answering.remove(key)
                var alerts = state.apps[app] ?? AppAlerts()
                for entry in alerts.delivered where entry.id == id {
                    step.change.undeliver.append((app.value, entry.serial))
                    step.charges[app, default: 0] -= entry.bytes
                }
                alerts.delivered.removeAll { $0.id == id }
                if alerts.delivered.isEmpty { alerts.dropped = 0 }
                state.apps[app] = alerts
                step.touched.insert(app)
            }
        } catch {
            // The answer is the app's already; the list comes back from the store as it was, and the desktop is owed
            // nothing more of it.
            self.logger.warning(
                "An answered notification stays in the delivered list (\(error)), ignoring",
                metadata: ["app": "\(app)", "notification": "\(id)"]
            )
            self.answered(app, id: id)
        }
        if self.state.withLock({ $0.interruptions.answered(id, of: app) }) == .ends(app) {
            _ = try? self.apps.interrupt(name: app.value, begins: false, cause: .alert)
        }
        guard action != "dismiss" else { return }
        let destination: LaunchDestination = action == "default" || button?.foreground == true ? .foreground : .background
        switch snapshot.state {
        case .notRunning:
            Task {
                do {
                    _ = try await self.apps.launch(
                        name: app.value, destination: destination, reason: .notification(id: id, action: action)
                    )
                } catch {
                    self.logger.warning("Cannot launch the app for a notification's response: \(error)", metadata: ["app": "\(app)"])
                }
            }
        case .background where destination == .foreground, .suspended where destination == .foreground:
            do {
                _ = try self.apps.activate(name: app.value)
            } catch {
                self.logger.info("The app answered was not brought forward: \(error)", metadata: ["app": "\(app)"])
            }
        case .suspended:
            // An action that runs in the background wakes the app for it, as iOS does for a background action.
            self.apps.wakeIntoBackground(app, reason: .notificationAction)
        default:
            break
        }
    }

    /// An answer's event the app's inbox did not keep, as the caller hears it: past a quota, the quota, as Schedule
    /// names it; otherwise why it was not kept.
    private static func notKept(_ failure: any Error) -> NotificationError {
        if case .overQuota(let quota) = failure as? PostRefusal { return .quotaExceeded(quota) }
        return .storageFailed(reason: "\(failure)")
    }
}
