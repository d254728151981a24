import CoalesceCore
import Synchronization
import Varlink

/// Journal watches' posts (DESIGN.md §5): who receives a watch's events, and its posts with their positions.
extension AppManager {
    /// The apps a watch's events go to now: its app, or the topic's subscribers, each only if its posters rules let
    /// `poster` (the watch's owner) post to it.
    func journalRecipients(_ target: WatchTarget, poster: VarlinkPeer) -> [AppName] {
        let recipients = self.state.withLock { state -> [Recipient] in
            switch target {
            case .app(let app): state.update(app) { [Recipient($0, app, uid: poster.uid)] } ?? []
            case .topic(let topic):
                (state.subscribers[topic] ?? []).sorted().compactMap { name in state.update(name) { Recipient($0, name, uid: poster.uid) } }
            }
        }
        return recipients.filter { $0.allows(poster) }.map(\.app)
    }

    /// The uid that owns a registered app.
    func owner(of app: AppName) -> UInt32? {
        self.state.withLock { $0.records[app]?.registration.owner }
    }

    /// Posts one batch of a watch's entries to one app, carrying the watch's position, which goes into the same
    /// write as the post (``JournalMarks``). `finished` hears whether it was sent, or why it was not kept.
    /// Returns false when the app is not registered (any more).
    func postJournal(
        _ app: AppName,
        kind: EventKind,
        payload: JSONValue,
        policy: CoalescingPolicy,
        weight: Int,
        poster: UInt32,
        mark: JournalMark,
        finished: @escaping @Sendable (_ sent: Bool, (any Error)?) -> Void
    ) -> Bool {
        let post = Post(target: app.value, kind: kind, payload: EventPayload(payload), policy: policy)
        if case .enqueued = self.enqueuePost(app, post, poster: poster, weight: weight, journalMark: mark, finished: finished) {
            return true
        }
        return false
    }
}
