import CoalesceCore
import CoalesceStore
import Logging
import NIOCore
import Synchronization
import Varlink

/// The presentation rate in the center: each presentation the scheduler makes goes through the core's
/// ``PresentationRate`` (per user, `[Notifications] PresentationBurst=` per `PresentationIntervalSec=`). One within
/// the rate is delivered and presented as the step is carried out; one past it is folded into its thread's held
/// presentation, whose delivered entry is written at once (so a crash loses nothing, and ListDelivered shows it with
/// its count) and presented when its window ends, from the timer armed here. The journal hears once when a user
/// passes the rate, and once when the stretch ends.
extension NotificationCenter {
    /// The rate, which delivered entry stands for each held presentation, and the timer for the next window end.
    struct RateState {
        var rate = PresentationRate(bound: PresentationRate.Bound(burst: 20, interval: .seconds(10)))
        /// The serial of the delivered entry that stands for each thread's held presentation.
        var entries: [PresentationRate.Thread: Int64] = [:]
        /// The window end the timer is armed for (``NotificationCenter/rateTimer``).
        var armed: BootTime?
    }

    /// What the journal says of the presentation rate.
    enum RateNotice: Sendable {
        /// The apps of `owner` passed the rate, with a presentation of `app`'s.
        case passed(owner: UInt32, app: AppName, bound: PresentationRate.Bound)
        /// The stretch over the rate ended: `held` presentations were coalesced into `presented` ones.
        case ended(owner: UInt32, held: Int, presented: Int)
    }

    /// One presentation the scheduler made, under the lock: delivered and presented with the step, or held.
    func admit(_ presentation: AlertPresentation, now: BootTime, to state: inout State, _ step: inout Step) {
        let settings = self.daemon.configuration.notifications
        state.rate.rate.bound = PresentationRate.Bound(burst: settings.presentationBurst, interval: settings.presentationInterval)
        // An app unregistered meanwhile has no owner to count against: its presentation goes as any would.
        guard let owner = self.apps.owner(of: presentation.app) else {
            return step.presentations.append((presentation, self.deliver(presentation, to: &state, &step).entry))
        }
        // A held presentation answered or removed meanwhile is not folded into: its thread starts again.
        let threads = [presentation.content.threadID, nil].map { PresentationRate.Thread(app: presentation.app, thread: $0) }
        for thread in threads {
            guard let serial = state.rate.entries[thread], state.apps[presentation.app]?.delivered.index(ofSerial: serial) == nil
            else { continue }
            state.rate.entries[thread] = nil
            state.rate.rate.forget(thread, of: owner)
        }
        switch state.rate.rate.admit(presentation, owner: owner, now: now) {
        case .present:
            step.presentations.append((presentation, self.deliver(presentation, to: &state, &step).entry))
        case .hold(let held, let newThread, let passed):
            if passed { step.rateNotices.append(.passed(owner: owner, app: presentation.app, bound: state.rate.rate.bound)) }
            let replacing = newThread ? nil : state.rate.entries[held.thread]
            state.rate.entries[held.thread] = self.deliver(held.presentation, replacing: replacing, to: &state, &step).serial
            self.armRate(&state, now: now)
        }
    }

    /// Puts a presentation in its app's delivered list, as a new entry or in place of the entry of serial
    /// `replacing` (a held presentation folded into again; a new entry if it went meanwhile), the oldest going past
    /// MaxDelivered=, and sets the badge its content gives. Under the lock.
    @discardableResult
    func deliver(
        _ presentation: AlertPresentation,
        replacing: Int64? = nil,
        to state: inout State,
        _ step: inout Step
    ) -> (serial: Int64, entry: JSONObject) {
        let app = presentation.app
        let maxDelivered = self.daemon.configuration.notifications.maxDelivered
        var alerts = state.apps[app] ?? AppAlerts()
        let index = replacing.flatMap { alerts.delivered.index(ofSerial: $0) }
        let serial = index.map { alerts.delivered[$0].serial } ?? alerts.nextSerial
        if index == nil { alerts.nextSerial += 1 }
        let entry = NotificationWire.json(presentation, serial: serial)
        let text = JSONValue.object(entry).jsonText
        let delivered = Delivered(serial: serial, id: presentation.id, entry: entry, bytes: text.utf8.count, sight: .presenting)
        step.change.deliver.append(Store.AlertDeliveredRow(app: app.value, serial: serial, entry: text))
        step.charges[app, default: 0] += text.utf8.count
        if let index {
            step.charges[app, default: 0] -= alerts.delivered[index].bytes
            alerts.delivered[index] = delivered
        } else {
            alerts.delivered.append(delivered)
        }
        if alerts.delivered.count > maxDelivered {
            let gone = alerts.delivered.count - maxDelivered
            for old in alerts.delivered.prefix(gone) {
                step.change.undeliver.append((app.value, old.serial))
                step.charges[app, default: 0] -= old.bytes
            }
            let dropped = alerts.delivered.prefix(gone).map(\.id)
            alerts.delivered.removeFirst(gone)
            alerts.dropped += Int64(gone)
            // An alert dropped for room can no longer be answered, unless a newer presentation of its request is
            // still listed: it stops interrupting the app.
            let unanswerable = dropped.filter { id in !alerts.delivered.contains { $0.id == id } }
            if case .ends = state.interruptions.removed(unanswerable, of: app) { step.endsInterruption.insert(app) }
        }
        if let badge = presentation.content.badge { alerts.badge = max(0, badge) }
        state.apps[app] = alerts
        step.touched.insert(app)
        return (serial, entry)
    }

    /// Arms the timer for the rate's next window end, unless it is armed for then or sooner. Under the lock.
    private func armRate(_ state: inout State, now: BootTime) {
        guard let due = state.rate.rate.nextDue else { return }
        if let armed = state.rate.armed, armed <= due { return }
        state.rate.armed = due
        state.outbox.add(.armRate(after: .nanoseconds(max(0, due.nanoseconds - now.nanoseconds))))
    }

    /// The rate's timer: the windows that ended present what they held (a held presentation answered or removed
    /// meanwhile presents nothing), and the stretches that ended are logged.
    func rateDue() {
        self.perform({ state, now, step in
            state.rate.armed = nil
            for action in state.rate.rate.due(now: now.boot) {
                switch action {
                case .present(let held):
                    guard let serial = state.rate.entries.removeValue(forKey: held.thread),
                        let index = state.apps[held.thread.app]?.delivered.index(ofSerial: serial)
                    else { continue }
                    step.presentations.append((held.presentation, state.apps[held.thread.app]!.delivered[index].entry))
                case .ended(let owner, let held, let presented):
                    step.rateNotices.append(.ended(owner: owner, held: held, presented: presented))
                }
            }
            self.armRate(&state, now: now.boot)
        }, completion: { _ in })
    }

    /// Cancels the rate's timer: what it holds stays in the delivered lists, shown to the next agent after a start.
    func stopRate() {
        self.decide { state in
            state.rate.armed = nil
            state.outbox.add(.armRate(after: nil))
        }
    }

    /// Says in the journal what the presentation rate did: once when a user passes it, once when the stretch ends.
    func logRate(_ notices: [RateNotice]) {
        for notice in notices {
            switch notice {
            case .passed(let owner, let app, let bound):
                self.logger.notice(
                    "A user's notifications pass the presentation rate: further ones are coalesced per thread until it is kept again",
                    metadata: [
                        "message_id": "\(MessageID.notificationsCoalesced)", "uid": "\(owner)", "app": "\(app)",
                        "burst": "\(bound.burst)", "interval": "\(bound.interval)",
                    ]
                )
            case .ended(let owner, let held, let presented):
                self.logger.info(
                    "A user's notifications keep the presentation rate again",
                    metadata: ["uid": "\(owner)", "held": "\(held)", "presented": "\(presented)"]
                )
            }
        }
    }
}
