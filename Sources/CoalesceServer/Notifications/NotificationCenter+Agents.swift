import CoalesceCore
import CoalesceStore
import Logging
import Synchronization
import Varlink

/// The presentation agents (io.coalesced.Notifications.Presentations): each agent's stream, what the desktop of
/// each app's user was sent, and what an agent that connects is sent of what its user missed.
///
/// Each delivered entry knows where it stands with the desktop of its app's user (``Delivered/Sight``): presented
/// while an agent of that user was connected, it is shown; presented while none was, it waits in the delivered list
/// for the next agent of that user, which gets it after its first reply and before anything presented later.
/// Whether an entry is shown is kept in the store, so that a restart neither shows everything again nor drops what
/// came due while the daemon was down.
extension NotificationCenter {
    /// An agent whose unread presentations pass this many bytes is ended: it does not read.
    static let agentBacklogBound = 1 << 20

    /// What an agent that connects is sent of what its user missed: the newest this many of its user's apps'
    /// presentations that no agent of the user was sent, in at most half of ``agentBacklogBound`` (the rest of the
    /// bound is room for what is presented while it reads them). The agent's own queue for a missing notification
    /// server holds as many; older ones stay in the delivered lists.
    static let agentMissedLimit = 64

    /// Serves one presentation agent until it hangs up: first an empty reply, then what its user missed, then every
    /// presentation of the apps it may see, from now on.
    func serveAgent(_ responder: VarlinkResponder, peer: VarlinkPeer?) async {
        guard let peer else { return }
        let admin = Authorization.isAdmin(peer, group: self.daemon.configuration.adminGroup)
        // The first reply and what was missed are decided with the registration, and sent in that order: a
        // presentation carried out before it is among the missed ones or was shown, one after it reaches this agent
        // live; none comes before them, none twice.
        let (id, missed) = self.decide { state in
            let id = state.nextAgent
            state.nextAgent += 1
            state.agents[id] = Agent(responder: responder, uid: peer.uid, admin: admin)
            let missed = self.takeMissed(of: peer.uid, &state)
            state.outbox.add(.send(responder, [[:]] + missed.sent.map { ["presentation": .object($0)] }))
            return (id, missed)
        }
        self.logger.info(
            "A presentation agent connected",
            metadata: [
                "uid": "\(peer.uid)", "pid": "\(peer.pid)", "missed": "\(missed.sent.count)",
                "missed_skipped": "\(missed.skipped)",
            ]
        )
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let gone = self.state.withLock { state in
                    guard state.agents[id] != nil else { return true }
                    state.agents[id]!.continuation = continuation
                    return false
                }
                if gone { continuation.resume() }
            }
        } onCancel: {
            // Cancellation may run inside a write to a peer that is gone (closing the channel cancels this task): no
            // write is made under the lock, so it is taken here.
            self.state.withLock { $0.agents.removeValue(forKey: id) }?.continuation?.resume()
        }
        self.logger.info("A presentation agent went away", metadata: ["uid": "\(peer.uid)", "pid": "\(peer.pid)"])
    }

    /// The entries of `uid`'s apps that no agent of the user was sent, oldest first, bounded by
    /// ``agentMissedLimit`` and half of ``agentBacklogBound`` (the newest kept); all of them are shown from now on,
    /// in memory and, a write later, in the store. Called under the lock.
    private func takeMissed(of uid: UInt32, _ state: inout State) -> (sent: [JSONObject], skipped: Int) {
        var found: [(app: AppName, index: Int, date: Double)] = []
        for (app, alerts) in state.apps where alerts.delivered.contains(where: { $0.sight == .unseen }) {
            guard self.apps.owner(of: app) == uid else { continue }
            for (index, entry) in alerts.delivered.enumerated() where entry.sight == .unseen {
                found.append((app, index, entry.entry["date"]?.doubleValue ?? 0))
            }
        }
        guard !found.isEmpty else { return ([], 0) }
        found.sort { ($0.date, $0.app.value, $0.index) < ($1.date, $1.app.value, $1.index) }
        var sent: [JSONObject] = []
        var bytes = 0
        var full = false
        var change = Store.AlertChange()
        for (app, index, _) in found.reversed() {
            let entry = state.apps[app]!.delivered[index]
            state.apps[app]!.delivered[index].sight = .shown
            change.shown.append((app.value, entry.serial))
            full = full || sent.count == Self.agentMissedLimit || bytes + entry.bytes > Self.agentBacklogBound / 2
            guard !full else { continue }
            bytes += entry.bytes
            sent.append(entry.entry)
        }
        self.noteShown(change, in: &state)
        return (sent.reversed(), found.count - sent.count)
    }

    /// Sends presentations to each agent of their app's user and each administrator's, one write per agent, and
    /// notes which ones the desktop of their app's user was sent (`owner` nil: it went to the active app alone and
    /// the desktop owes it nothing). One that does not read is ended.
    func tellAgents(_ presentations: [(app: AppName, serial: Int64, owner: UInt32?, entry: JSONObject)]) {
        var overrun: [Agent] = []
        let agents = self.decide { state -> [(Agent, [JSONObject])] in
            var chosen: [(Agent, [JSONObject])] = []
            var told: Set<UInt32> = []
            for (id, agent) in state.agents {
                let replies = presentations.lazy.filter { $0.owner.map { agent.admin || agent.uid == $0 } ?? false }
                    .map { ["presentation": .object($0.entry)] as JSONObject }
                guard !replies.isEmpty else { continue }
                if agent.responder.backlog > Self.agentBacklogBound {
                    overrun.append(state.agents.removeValue(forKey: id)!)
                } else {
                    chosen.append((agent, Array(replies)))
                    told.insert(agent.uid)
                }
            }
            // Under the same lock as an agent's registration: an entry an agent of its user was not told of here is
            // what the next one to connect gets.
            var change = Store.AlertChange()
            for presentation in presentations {
                guard let index = state.apps[presentation.app]?.delivered.index(ofSerial: presentation.serial),
                    state.apps[presentation.app]!.delivered[index].sight == .presenting
                else { continue }  // taken off the list meanwhile
                let shown = presentation.owner.map(told.contains) ?? true
                state.apps[presentation.app]!.delivered[index].sight = shown ? .shown : .unseen
                if shown { change.shown.append((presentation.app.value, presentation.serial)) }
            }
            self.noteShown(change, in: &state)
            return chosen
        }
        for (agent, replies) in agents { agent.responder.send(all: replies) }
        for agent in overrun {
            self.logger.warning("A presentation agent did not read its presentations and was ended", metadata: ["uid": "\(agent.uid)"])
            agent.responder.failAndClose(NotificationError.agentOverrun(limit: Self.agentBacklogBound))
            agent.continuation?.resume()
        }
    }

    /// The user answered the app's notification `id`: the desktop owes its presentations nothing more.
    func answered(_ app: AppName, id: String) {
        self.decide { state in
            guard var alerts = state.apps[app] else { return }
            var change = Store.AlertChange()
            for index in alerts.delivered.indices where alerts.delivered[index].id == id && alerts.delivered[index].sight == .unseen {
                alerts.delivered[index].sight = .shown
                change.shown.append((app.value, alerts.delivered[index].serial))
            }
            state.apps[app] = alerts
            self.noteShown(change, in: &state)
        }
    }

    /// Writes which entries are shown; queued in the order decided, so that it reaches the store after the entries'
    /// own write. A write the store refuses leaves them unshown there (and is reported as any refusal is): the next
    /// start sends them once more rather than never.
    private func noteShown(_ change: Store.AlertChange, in state: inout State) {
        guard !change.isEmpty else { return }
        self.queueWrite(change, in: &state) { self.apps.writes.report("notifications", $0) }
    }
}

extension [NotificationCenter.Delivered] {
    /// Where the entry of this serial is in a delivered list, which is in the order of its serials: found by halves,
    /// as a list may hold up to MaxDelivered= entries and a burst names many.
    func index(ofSerial serial: Int64) -> Int? {
        var low = self.startIndex
        var high = self.endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if self[middle].serial < serial { low = middle + 1 } else { high = middle }
        }
        return low < self.endIndex && self[low].serial == serial ? low : nil
    }
}
