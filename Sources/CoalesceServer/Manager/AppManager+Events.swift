import CoalesceCore
import CoalesceStore
import CoalesceWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Varlink

/// Events: the shell around each app's ``Inbox``, which decides what is sent, held, written and answered. Here posts
/// are checked and handed to it, and its actions carried out: rows to the store, events to the app's stream,
/// answers to the posters, a retry timer.
///
/// Posts that come together (one pass of an event loop) are handed to the store together: the apps they touched
/// make their writes at the end of the pass (``flushInboxes()``), one transaction and one fsync for all of them.
/// Events are numbered under the manager's lock and go out through its outbox (``decide(_:)``), so that an app's
/// callbacks and events leave in the order they were numbered.
extension AppManager {
    /// Targets naming a topic start with this.
    static let topicPrefix: StaticString = "topic:"

    /// What a post came to: whether an app was sent it, how many apps kept it, and (for a topic) the subscribers
    /// that refused it; a failure when every recipient refused.
    typealias PostResult = Result<PostOutcome, AppError>

    struct PostOutcome: Sendable {
        var delivered: Bool
        var recipients: Int
        var refused: [(app: AppName, error: AppError)]
    }

    /// Posts an event to an app, or to every app subscribed to a topic (`topic:NAME`) that lets the caller post:
    /// sent to an app that runs code, held and coalesced for one that is suspended or not running. Decided now, in
    /// the order posts come; `answer` hears whether any app was sent it, and how many apps it went to, once it is
    /// on disk (at once for a volatile kind with nothing before it).
    /// - Throws: ``AppError`` for what can be told at once: a bad kind, an unknown target, no permission.
    func post(
        target: String,
        kind kindName: String,
        payload: JSONValue,
        policy: CoalescingPolicy?,
        peer: VarlinkPeer,
        answer: @escaping @Sendable (PostResult) -> Void
    ) throws(AppError) {
        let kind: EventKind
        do { kind = try EventKind(kindName) } catch { throw .invalidKind(kind: kindName, reason: error.reason) }
        let post = Post(target: target, kind: kind, payload: EventPayload(payload), policy: policy)
        // By bytes, here and for the topic's name (a prefix of graphemes would cut a mark combining with its ':').
        guard target.startsWithBytes(of: Self.topicPrefix) else {
            // One app: answered straight from its write. Whether the target is a valid name at all needs no
            // check of its own: an invalid one is no registered app either.
            let appName = AppName(lookingUp: target)
            let finished: @Sendable (Bool, (any Error)?) -> Void = { sent, failure in
                answer(failure.map { .failure(Self.postError($0, target: target)) }
                    ?? .success(PostOutcome(delivered: sent, recipients: 1, refused: [])))
            }
            switch self.enqueuePost(appName, post, poster: peer.uid, checking: true, finished: finished) {
            case .unknownApp: throw .unknownTarget(target: target)
            case .notAllowed: throw .notAllowedToPost(target: target)
            case .groupsDecide(let recipient):
                guard recipient.allows(peer) else { throw .notAllowedToPost(target: target) }
                self.enqueuePost(appName, post, poster: peer.uid, finished: finished)
            case .enqueued: break
            }
            return
        }
        let topicName = String(decoding: target.utf8.dropFirst(Self.topicPrefix.utf8CodeUnitCount), as: UTF8.self)
        guard let topic = try? EventKind(topicName) else {
            throw .unknownTarget(target: target)
        }
        let subscribers = self.state.withLock { state in
            (state.subscribers[topic] ?? []).sorted().compactMap { name in
                state.update(name) { Recipient($0, name, uid: peer.uid) }
            }
        }
        guard !subscribers.isEmpty else { throw .unknownTarget(target: target) }
        let allowed = subscribers.filter { $0.allows(peer) }
        guard !allowed.isEmpty else { throw .notAllowedToPost(target: target) }
        let tally = PostTally(recipients: allowed.map(\.app), target: target, answer: answer)
        for recipient in allowed {
            self.enqueuePost(recipient.app, post, poster: peer.uid) { sent, failure in tally.finished(recipient.app, sent: sent, failure) }
        }
    }

    /// One post as it came.
    struct Post: Sendable {
        var target: String
        var kind: EventKind
        var payload: EventPayload
        var policy: CoalescingPolicy?
    }

    /// What a post needs to know of an app it goes to, read under the lock (borrowed: a record is large to copy).
    struct Recipient {
        var app: AppName
        /// Whether the caller may post to it, when its uid settles that; else who may, for a check of the caller's
        /// groups outside the lock.
        var permission: Permission

        enum Permission {
            case allowed
            case denied
            case byGroup(EventDeclarations.Posters, owner: UInt32)
        }

        /// - Parameter uid: the poster's; its groups, where they decide, are looked at later (``allows(_:)``).
        init(_ record: borrowing Record, _ app: AppName, uid: UInt32) {
            self.app = app
            let owner = record.registration.owner
            // The posters are copied only when the groups decide: a copy retains and releases their tables.
            switch record.declarations.posters.settled(uid: uid, owner: owner) {
            case true?: self.permission = .allowed
            case false?: self.permission = .denied
            case nil: self.permission = .byGroup(record.declarations.posters, owner: owner)
            }
        }

        func allows(_ peer: VarlinkPeer) -> Bool {
            switch self.permission {
            case .allowed: true
            case .denied: false
            case .byGroup(let posters, let owner): posters.allow(peer, owner: owner)
            }
        }
    }

    /// A refused post's error as the poster sees it.
    static func postError(_ failure: any Error, target: String) -> AppError {
        switch failure {
        case let refusal as PostRefusal: AppError(refusal, target: target)
        case let failure as StoreError: .storageFailed(reason: failure.description)
        default: .storageFailed(reason: "\(failure)")
        }
    }

    /// How ``enqueuePost(_:_:checking:finished:)`` went.
    enum Enqueued {
        /// Taken: sent to the app at once, or held (and the app launched, when the post's kind wakes it).
        case enqueued
        case unknownApp
        /// The poster may not post to the app.
        case notAllowed
        /// Whether the poster may post to the app depends on its groups, to be looked up outside the lock.
        case groupsDecide(Recipient)
    }

    /// A post of a kind mapped to a background mode launches a stopped app into the background (through its
    /// launch unit, or when its process attaches), where the event reaches it after the launch's callbacks. An app
    /// already running holds the event until it runs code again; a launch already on its way is left as it is.
    /// Launches held after failures (``AppLifecycle/launchesHeld``) are not tried: the event waits in the inbox.
    func launchForEvent(_ appName: AppName, kind: EventKind) {
        let start = self.state.withLock { state in
            guard let record = state.records[appName] else { return false }
            return record.lifecycle.state == .notRunning && record.pendingLaunch == nil && !record.lifecycle.launchesHeld
        }
        guard start else { return }
        Task {
            do {
                _ = try await self.launch(name: appName.value, destination: .background, reason: .event(kind: kind.value))
            } catch {
                self.logger.warning(
                    "\(appName): could not launch it for an event",
                    metadata: ["app": "\(appName)", "reason": "\(error)"]
                )
            }
        }
    }

    /// How the inbox answers one post: the poster's callback, told whether the app was sent it and what failed.
    struct PostTicket: Sendable {
        let finished: @Sendable (_ sent: Bool, (any Error)?) -> Void
        /// What monitors are told of the post, kept in the manager's state (``State/postsSeen``) while a monitor
        /// watches traffic; 0: nothing. A number, not a reference: copying a ticket retains nothing more.
        var seen = 0

        /// Tells the poster what its post came to; `failure` is the store's error when the write failed.
        func answer(_ answer: AppInbox.Answer, failure: StoreError) {
            switch answer {
            case .sent: self.finished(true, nil)
            case .held: self.finished(false, nil)
            case .refused(let refusal): self.finished(false, refusal)
            case .storeFailed: self.finished(false, failure)
            }
        }
    }

    typealias AppInbox = Inbox<EventPayload, Double, PostTicket>
    typealias InboxAction = AppInbox.Action

    /// One app's part of a post, under the lock: checked (with `checking`, whether `posterUID` may post is checked
    /// first, in the same look at the app's record: one lookup and one lock for a post to one app) and handed to its
    /// inbox. `finished` is called once the inbox answers, unless the post was not taken. A post of a kind that
    /// wakes the app into the background launches a stopped app.
    @discardableResult
    func enqueuePost(
        _ appName: AppName,
        _ post: Post,
        poster posterUID: UInt32,
        checking: Bool = false,
        weight: Int = 1,
        journalMark: JournalMark? = nil,
        finished: @escaping @Sendable (_ sent: Bool, (any Error)?) -> Void
    ) -> Enqueued {
        var answered: AppInbox.Answer?
        var ticket = PostTicket(finished: finished)
        var sentAtOnce: [AppInbox.Sent] = []
        var launches = false
        var wakes = false
        var flushes = false
        var unwrittenMark: JournalMark?
        var batch: [AppAction] = []
        var drains = false
        let outcome = self.state.withLock { state -> Enqueued in
            defer { drains = state.outbox.take(into: &batch) }
            let ledger = state.ledger
            // The one check a post makes for monitors: while none watches traffic, it makes nothing for them.
            let watched = state.monitoring.watchesTraffic
            if watched { ticket.seen = state.monitoring.nextPostSeen }
            let posted = self.wall()
            let outcome = state.deciding(appName) { record, outbox -> Enqueued in
                if checking {
                    let recipient = Recipient(record, appName, uid: posterUID)
                    switch recipient.permission {
                    case .allowed: break
                    case .denied: return .notAllowed
                    case .byGroup: return .groupsDecide(recipient)
                    }
                }
                // The kind's declaration, looked up once for its policy, its volatility and the mode it wakes into.
                let declared = record.declarations.kinds[post.kind]
                let accepted = AppInbox.Post(
                    kind: post.kind,
                    payload: post.payload,
                    policy: post.policy ?? declared?.policy ?? .latest,
                    durable: !(declared?.volatile ?? false),
                    posted: posted,
                    ticket: ticket,
                    weight: weight
                )
                switch Self.numbering(&record, ledger, { inbox, reception, next in inbox.posted(accepted, reception, next: &next) }) {
                case .waits:
                    if let journalMark { record.journalMarks.add(journalMark) }
                    if record.inbox.hasWaiting, !record.flushQueued {
                        record.flushQueued = true
                        flushes = true
                    }
                case .answered(let answer, let burst):
                    // Decided at once (a volatile kind's): no write carries its position.
                    if let journalMark { unwrittenMark = journalMark }
                    if case .held = answer, declared?.wakes != nil, record.lifecycle.state == .suspended { wakes = true }
                    if !burst.isEmpty {
                        if let stream = record.attachment?.responder {
                            outbox.add(.sendEvents(stream, burst, record.lifecycle.state))
                        }
                        if watched { sentAtOnce = burst }
                    }
                    answered = answer
                }
                launches = declared?.backgroundMode != nil && record.lifecycle.state == .notRunning
                return .enqueued
            } ?? .unknownApp
            if flushes { state.unflushed.append(appName) }
            if let answered { state.count(answered) }
            if watched, case .enqueued = outcome {
                self.seen(
                    post, poster: posterUID, watch: journalMark?.watch, posted: posted, ticket: ticket, to: appName, answered, sentAtOnce,
                    in: &state
                )
            }
            return outcome
        }
        if drains { self.drain(&batch) }
        guard case .enqueued = outcome else { return outcome }
        if let unwrittenMark {
            self.store.setJournalPosition(watch: unwrittenMark.watch.value, app: appName.value, cursor: unwrittenMark.cursor)
        }
        if let answered { ticket.answer(answered, failure: self.writeRefused) }
        if flushes { self.scheduleFlush() }
        if launches { self.launchForEvent(appName, kind: post.kind) }
        if wakes { self.wakeForEvents(appName) }
        return outcome
    }

    /// Feeds one input to an app's inbox, numbering what it sends from the app's one counter. Two of its actions
    /// are queued now, in the order decided: the events it sends, for the app's stream (left in the list too, for
    /// ``countPostsAndTellMonitors(_:of:in:)`` to tell monitors), and its write, for the store (made here, so that the record keeps its
    /// handle and posts that come before the store begins it can join it; taken out of the list).
    /// - Parameter together: the write waits for ``Store/hurry()`` to go with the others of the event loop's pass.
    func inboxInput(
        _ record: inout Record,
        of appName: AppName,
        charging ledger: QuotaLedger,
        together: Bool = false,
        outbox: inout Outbox<AppAction>,
        _ body: (inout AppInbox, Reception, inout UInt64) -> [InboxAction]
    ) -> [InboxAction] {
        var actions = Self.numbering(&record, ledger, body)
        Self.queueSends(actions, to: record.attachment?.responder, state: record.lifecycle.state, in: &outbox)
        if let index = actions.firstIndex(where: { if case .write = $0 { true } else { false } }),
            case .write(let rows) = actions.remove(at: index)
        {
            // Every post waiting is in this write: the journal positions they carry go with them.
            let marks = record.journalMarks.intoNewWrite()
            let write = self.store.eventWrite(rows.map(Self.storeRow) + marks, of: appName) { result in
                self.written(appName, result)
            }
            record.pendingWrite = write
            outbox.add(.submit(write, together: together))
        }
        return actions
    }

    /// What the inbox needs to know of the app now, its allowance by the quotas among it.
    static func reception(_ record: borrowing Record, _ ledger: QuotaLedger) -> Reception {
        Reception(
            runs: record.lifecycle.receivesAtOnce,
            attached: record.attachment != nil,
            keepsUp: (record.attachment?.responder.backlog ?? 0) < Self.monitorBacklogBound,
            allowance: ledger.allowance(record.account, footprint: record.inbox.footprint)
        )
    }

    /// Feeds one input to an app's inbox, as the app is now, with the next number of the app's one counter (the
    /// lifecycle's, so that callbacks and events share it); the ledger is charged with what its events take after.
    static func numbering<T>(
        _ record: inout Record,
        _ ledger: QuotaLedger,
        _ body: (inout AppInbox, Reception, inout UInt64) -> T
    ) -> T {
        let reception = Self.reception(record, ledger)
        let footprint = record.inbox.footprint
        var next = record.lifecycle.nextSequence
        defer {
            record.lifecycle.nextSequence = next
            ledger.charge(record.account, record.inbox.footprint - footprint)
        }
        return body(&record.inbox, reception, &next)
    }

    /// Queues the events among `actions` for the app's stream, in order.
    static func queueSends(_ actions: [InboxAction], to stream: VarlinkResponder?, state: AppState, in outbox: inout Outbox<AppAction>) {
        // Looked for without copying the actions out: most inputs (a post held) send nothing.
        guard let stream, actions.contains(where: { if case .send = $0 { true } else { false } }) else { return }
        for case .send(let burst) in actions { outbox.add(.sendEvents(stream, burst, state)) }
    }

    /// Sends one burst of events. One write for them all: a wake's events reach the app as one burst (its library
    /// acknowledges a burst once).
    static func send(_ burst: [AppInbox.Sent], to stream: VarlinkResponder, state: AppState) {
        stream.send(all: burst.map { Self.reply(EventCoding.event($0.event), seq: $0.seq, state: state) })
    }

    /// Counts the posts the actions answer, sent at once or held, and tells the monitors that watch traffic of
    /// those posts and of the events that went out (the actions' sends, already on the app's stream).
    func countPostsAndTellMonitors(_ actions: [InboxAction], of app: AppName, in state: inout State) {
        for case .answer(let answers) in actions {
            for (_, answer) in answers { state.count(answer) }
        }
        if state.monitoring.watchesTraffic { self.tellMonitors(of: actions, app: app, in: &state) }
    }

    /// Keeps what monitors are told of a post taken while one watches traffic, under the number its ticket carries,
    /// and tells them of it now when the inbox answered it at once (a volatile post), with what that sent.
    func seen(
        _ post: Post,
        poster: UInt32,
        watch: WatchName?,
        posted: Double,
        ticket: PostTicket,
        to app: AppName,
        _ answered: AppInbox.Answer?,
        _ sent: [AppInbox.Sent],
        in state: inout State
    ) {
        state.monitoring.saw(PostSeen(target: post.target, kind: post.kind, uid: poster, time: posted, watch: watch), as: ticket.seen)
        if let answered { self.tellMonitors(of: [.answer([(ticket, answered)]), .send(sent)], app: app, in: &state) }
    }

    /// What ``countPostsAndTellMonitors(_:of:in:)`` tells monitors: each answer's posts, and each burst's deliveries after them.
    func tellMonitors(of actions: [InboxAction], app: AppName, in state: inout State) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .answer(let answers):
                let bursts = actions[(index + 1)...].compactMap { action -> [AppInbox.Sent]? in
                    if case .send(let burst) = action { burst } else { nil }
                }
                self.tellPosts(answers, to: app, sentIn: bursts, in: &state)
            case .send(let burst): self.tellDeliveries(burst, of: app, in: &state)
            case .write, .forget, .retryLater: break
            }
        }
    }

    /// The stream reply that sends an event numbered `seq`.
    static func reply(_ event: JSONValue, seq: UInt64, state: AppState) -> JSONObject {
        var callback = event.objectValue ?? [:]
        callback["seq"] = .int(Int64(bitPattern: seq))
        return ["state": .string(state.rawValue), "callback": .object(callback)]
    }

    /// What an app holds (on disk, and of volatile kinds in memory only), kind by kind in order of first post, and
    /// how many events it has not acknowledged.
    func queue(of name: String) throws(SystemError) -> (held: [(kind: EventKind, slot: EventCoding.Queue.Slot)], unacknowledged: Int) {
        let appName = try Self.systemAppName(name)
        return try self.state.withLock { state throws(SystemError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            let held = record.inbox.held
            return (held.kinds.map { ($0, held.slot(of: $0)!) }, record.inbox.outstanding)  // a kind held has a slot
        }
    }
}
