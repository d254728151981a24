import CoalesceCore
import CoalesceStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import Varlink

/// Events: posts, held and coalesced for an app that receives nothing, sent at once to one that runs code.
///
/// Every change to what an app holds or is sent goes through the store in the order it was decided (an
/// ``EventWrite``): the store's writer applies it to memory and writes it in the same step, and takes it back from
/// memory if the write fails. Events go out on the app's stream only once they are on disk, in the order they were
/// written, and are numbered on the stream as they go out. So an app never receives an event whose post was
/// refused, memory never holds what the disk does not, and the events of a wake follow the wake's callbacks.
extension AppManager {
    /// Targets naming a topic start with this.
    static let topicPrefix = "topic:"

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
        let recipients: [(AppName, EventDeclarations, UInt32)]
        if target.hasPrefix(Self.topicPrefix) {
            guard let topic = try? EventKind(String(target.dropFirst(Self.topicPrefix.count))) else {
                throw .unknownTarget(target: target)
            }
            recipients = self.state.withLock { state in
                (state.subscribers[topic] ?? []).sorted().compactMap { name in
                    state.records[name].map { (name, $0.declarations, $0.registration.owner) }
                }
            }
            guard !recipients.isEmpty else { throw .unknownTarget(target: target) }
        } else {
            guard let appName = try? AppName(target) else { throw .unknownTarget(target: target) }
            let found = try self.state.withLock { state throws(AppError) in
                guard let record = state.records[appName] else { throw .unknownTarget(target: target) }
                return (appName, record.declarations, record.registration.owner)
            }
            recipients = [found]
        }
        let post = Post(target: target, kind: kind, payload: EventPayload(payload), policy: policy)
        let allowed = recipients.filter { _, declarations, owner in declarations.mayPost(peer, owner: owner) }
        guard !allowed.isEmpty else { throw .notAllowedToPost(target: target) }
        self.deliver(post, to: allowed, answer: answer)
    }

    /// One post as it came.
    struct Post: Sendable {
        var target: String
        var kind: EventKind
        var payload: EventPayload
        var policy: CoalescingPolicy?
    }

    private func deliver(_ post: Post, to recipients: [(AppName, EventDeclarations, UInt32)], answer: @escaping @Sendable (PostResult) -> Void) {
        let tally = PostTally(recipients: recipients.map(\.0), target: post.target, answer: answer)
        var sentTo: Set<AppName> = []
        for (appName, declarations, _) in recipients {
            let sent = self.enqueuePost(appName, post) { failure in tally.finished(appName, failure) }
            if sent { sentTo.insert(appName) }
            if !sent, declarations.wakingKinds[post.kind] != nil { self.launchForEvent(appName) }
        }
        tally.decided(sentTo: sentTo)
    }

    /// A post of a kind mapped to a background mode launches a stopped app into the background (through its
    /// launch unit, or when its process attaches), where the event reaches it after the launch's callbacks. An app
    /// already running holds the event until it runs code again; a launch already on its way is left as it is.
    private func launchForEvent(_ appName: AppName) {
        let start = self.state.withLock { state in
            guard let record = state.records[appName] else { return false }
            return record.lifecycle.state == .notRunning && record.pendingLaunch == nil
        }
        guard start else { return }
        Task {
            do {
                _ = try await self.launch(name: appName.value, destination: .background)
            } catch {
                self.logger.warning(
                    "\(appName): could not launch it for an event",
                    metadata: ["app": "\(appName)", "reason": "\(error)"]
                )
            }
        }
    }

    /// One app's part of a post: sent or held, decided and handed to the store under the lock, so that the store
    /// applies posts in the order they were decided. A volatile kind with nothing of the app's on its way through
    /// the store is applied here and now. Returns whether the app is sent the event.
    private func enqueuePost(_ appName: AppName, _ post: Post, finished: @escaping @Sendable ((any Error)?) -> Void) -> Bool {
        var refusal: PostRefusal?
        let (sendsNow, write) = self.state.withLock { state -> (Bool, EventWrite?) in
            var counted: (sent: Int, held: Int) = (0, 0)
            defer {
                state.postsSent += counted.sent
                state.postsHeld += counted.held
            }
            return state.update(appName) { record -> (Bool, EventWrite?) in
                let posted = wallClock()
                let durable = !record.declarations.volatile.contains(post.kind)
                let policy = post.policy ?? record.declarations.policies[post.kind] ?? .latest
                // An app that does not keep up (too much unread or unacknowledged) gets its events held and
                // coalesced like a suspended one until it catches up, rather than growing the daemon's memory.
                let outstanding = record.unacked.count + record.undelivered.count + record.sendsInFlight
                // While a refused wake's delivery waits to be tried again, posts are held behind what it held.
                let sendsNow =
                    record.lifecycle.receivesAtOnce && record.attachment != nil && !record.drainFailed
                    && outstanding < Self.maximumUnacknowledged
                    && (record.attachment?.responder.backlog ?? 0) < Self.monitorBacklogBound
                // What it held while it lagged goes first (what a refused wake left is tried again on its own).
                if sendsNow { self.deliverHeld(appName, &record) }
                let inFlight = record.sendsInFlight > 0 || record.holdsInFlight > 0 || record.drainInFlight
                if !durable, !inFlight {
                    if sendsNow {
                        if policy == .netChange { record.queue.setBaseline(post.kind, post.payload) }
                        record.undelivered.append((nil, Self.event(post.kind, post.payload, posted: posted)))
                        self.sendUndelivered(&record)
                        counted.sent = 1
                    } else {
                        do throws(PostRefusal) {
                            try record.queue.post(post.kind, post.payload, policy: policy, at: posted)
                            counted.held = 1
                        } catch {
                            refusal = error
                        }
                    }
                    return (sendsNow, nil)
                }
                let write: EventWrite
                if sendsNow {
                    write = EventWrite(
                        manager: self, app: appName, durable: durable, finished: finished,
                        .send(post.kind, post.payload, netChange: policy == .netChange, posted: posted)
                    )
                    record.sendsInFlight += 1
                } else {
                    write = EventWrite(
                        manager: self, app: appName, durable: durable, finished: finished,
                        .hold(post.kind, post.payload, policy, posted: posted)
                    )
                    record.holdsInFlight += 1
                }
                self.store.submit(write)
                return (sendsNow, write)
            } ?? (false, nil)  // never: apps are not removed
        }
        if write == nil { finished(refusal) }
        return sendsNow
    }

    /// The event a post sends at once.
    fileprivate static func event(_ kind: EventKind, _ payload: EventPayload, posted: Double) -> JSONValue {
        EventCoding.event(CoalescedEvent(kind: kind, payload: payload, count: 1, firstPosted: posted, lastPosted: posted))
    }

    /// Once an app receives at once again (woken, launched, or a new stream attached): first what it has not
    /// acknowledged (after a new attach), renumbered, then what was written for it and not sent, then what it held,
    /// coalesced.
    func wake(_ appName: AppName, _ record: inout Record, wasReceiving: Bool) {
        guard record.lifecycle.receivesAtOnce, record.attachment != nil, !wasReceiving || record.redeliver else { return }
        self.sendPending(appName, &record)
    }

    func sendPending(_ appName: AppName, _ record: inout Record) {
        guard let attachment = record.attachment else { return }
        if record.redeliver {
            record.redeliver = false
            let unacked = record.unacked
            record.unacked = []
            for (_, id, event) in unacked {
                let seq = record.lifecycle.reserveSequence()
                self.send(event, seq: seq, state: record.lifecycle.state, to: attachment)
                record.unacked.append((seq, id, event))
            }
        }
        self.sendUndelivered(&record)
        self.deliverHeld(appName, &record)
    }

    /// Sends what was written for the app and not yet sent, if it receives now.
    private func sendUndelivered(_ record: inout Record) {
        guard record.lifecycle.receivesAtOnce, let attachment = record.attachment, !record.redeliver, !record.drainFailed
        else { return }
        for (id, event) in record.undelivered {
            let seq = record.lifecycle.reserveSequence()
            self.send(event, seq: seq, state: record.lifecycle.state, to: attachment)
            if id != nil { record.unacked.append((seq, id, event)) }
        }
        record.undelivered.removeAll()
    }

    /// Hands what the app holds (and what posts on their way will add) to the store to be delivered, unless that
    /// is already on its way.
    private func deliverHeld(_ appName: AppName, _ record: inout Record) {
        // After a refused delivery, even with nothing held: one that succeeds lets what waits behind it go.
        guard !record.drainInFlight, !record.queue.isEmpty || record.holdsInFlight > 0 || record.drainFailed else { return }
        record.drainInFlight = true
        self.store.submit(EventWrite(manager: self, app: appName, durable: true, .drain))
    }

    /// The app has handled what it was sent up to `sequence`: those events leave the store. An app that had fallen
    /// behind and caught up gets what was held meanwhile.
    func acknowledgeEvents(_ appName: AppName, upTo sequence: UInt64, in state: inout State) {
        guard var record = state.records[appName], record.unacked.first.map({ $0.seq <= sequence }) == true else { return }
        let handled = record.unacked.prefix { $0.seq <= sequence }
        record.unacked.removeFirst(handled.count)
        let ids = handled.compactMap(\.id)
        // Not waited for: an acknowledgement lost in a crash only means the events come again.
        if !ids.isEmpty { _ = self.store.acknowledge(app: appName, ids: ids) }
        if record.lifecycle.receivesAtOnce, record.unacked.count < Self.maximumUnacknowledged / 2, !record.drainFailed {
            self.deliverHeld(appName, &record)
        }
        state.records[appName] = record
    }

    func send(_ event: JSONValue, seq: UInt64, state: AppState, to attachment: Attachment) {
        var callback = event.objectValue ?? [:]
        callback["seq"] = .int(Int64(bitPattern: seq))
        attachment.responder.send(["state": .string(state.rawValue), "callback": .object(callback)])
    }

    /// What an app holds, kind by kind in order of first post, and how many events it has not acknowledged.
    func queue(of name: String) throws(AppError) -> (held: [(kind: EventKind, slot: EventCoding.Queue.Slot)], unacknowledged: Int) {
        let appName = try Self.systemAppName(name)
        return try self.state.withLock { state throws(AppError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            return (
                record.queue.kinds.map { ($0, record.queue.slot(of: $0)!) },
                record.unacked.count + record.undelivered.count
            )
        }
    }

    private enum DrainLog { case failed, recovered }

    /// How long after a failed delivery of what an app held it is tried again.
    static let drainRetryDelay = TimeAmount.seconds(1)

    /// Tries again to deliver what an app held, after the store refused it; an app that no longer receives gets it
    /// with its next wake instead.
    private func retryDrain(_ appName: AppName) {
        self.state.withLock { state in
            _ = state.update(appName) { record in
                guard record.drainFailed, !record.drainInFlight, record.lifecycle.receivesAtOnce, record.attachment != nil
                else { return }
                if record.queue.isEmpty, record.holdsInFlight == 0 {
                    record.drainFailed = false
                    self.sendUndelivered(&record)
                } else {
                    self.deliverHeld(appName, &record)
                }
            }
        }
    }

    // MARK: What an EventWrite does to memory (on the store's writer thread)

    /// Folds one post into what the app holds; returns the slot as it was (for undo) and as it is now, with its
    /// position among the kinds.
    /// - Throws: ``PostRefusal``, with nothing changed.
    fileprivate func fold(
        _ appName: AppName,
        _ kind: EventKind,
        _ payload: EventPayload,
        _ policy: CoalescingPolicy,
        posted: Double
    ) throws(PostRefusal) -> (before: EventCoding.Queue.Slot?, after: EventCoding.Queue.Slot, position: Int)? {
        try self.state.withLock { state throws(PostRefusal) in
            try state.update(appName) { record throws(PostRefusal) in
                let before = record.queue.slot(of: kind)
                try record.queue.post(kind, payload, policy: policy, at: posted)
                // The position matters only for a new kind's row: the upsert keeps a held kind's.
                return (before, record.queue.slot(of: kind)!, before == nil ? record.queue.kinds.count - 1 : 0)
            }
        }
    }

    fileprivate func unfold(_ appName: AppName, _ kind: EventKind, to slot: EventCoding.Queue.Slot?) {
        self.state.withLock { $0.records[appName]?.queue.reset(kind, to: slot) }
    }

    /// Sets the baseline of a netChange kind to what the app is sent; returns what it was before.
    fileprivate func setBaseline(_ appName: AppName, _ kind: EventKind, _ payload: EventPayload) -> EventPayload? {
        self.state.withLock { state in
            let before = state.records[appName]?.queue.lastDelivered[kind]
            state.records[appName]?.queue.setBaseline(kind, payload)
            return before
        }
    }

    fileprivate func resetBaseline(_ appName: AppName, _ kind: EventKind, _ payload: EventPayload?) {
        self.state.withLock { $0.records[appName]?.queue.setBaseline(kind, payload) }
    }

    /// Takes everything the app holds, coalesced; returns the queue as it was (for undo), the events, and which
    /// kinds are volatile.
    fileprivate func drain(_ appName: AppName) -> (before: EventCoding.Queue, events: [EventCoding.Queue.Event], volatile: Set<EventKind>)? {
        self.state.withLock { state in
            state.update(appName) { record in
                let before = record.queue
                return (before, record.queue.drain(), record.declarations.volatile)
            }
        }
    }

    fileprivate func restore(_ appName: AppName, queue: EventCoding.Queue) {
        self.state.withLock { $0.records[appName]?.queue = queue }
    }

    /// A write finished: its events go out in the order they were written, if the app receives now; otherwise
    /// they wait for it. The first write the store refuses, and the first one after that it keeps, are logged.
    fileprivate func finished(
        _ appName: AppName,
        _ action: EventWrite.Action,
        sending events: [(id: Int64?, event: JSONValue)],
        failure: (any Error)?
    ) {
        let storeFailure = failure as? StoreError
        var retry = false
        var drainLog: DrainLog?
        let change = self.state.withLock { state -> Bool in
            let succeeded = state.update(appName) { record -> Bool in
                switch action {
                case .send:
                    record.sendsInFlight -= 1
                    record.undelivered.append(contentsOf: events)
                case .hold: record.holdsInFlight -= 1
                case .drain:
                    record.drainInFlight = false
                    if failure != nil {
                        // The held events stay held, in memory and on disk; logged the first time, tried again.
                        if !record.drainFailed { drainLog = .failed }
                        record.drainFailed = true
                        retry = true
                    } else if record.drainFailed {
                        // A retry: what it held was posted before what waited behind it.
                        drainLog = .recovered
                        record.drainFailed = false
                        record.undelivered.insert(contentsOf: events, at: 0)
                    } else {
                        record.undelivered.append(contentsOf: events)
                    }
                }
                self.sendUndelivered(&record)
                return failure == nil
            }
            guard succeeded != nil else { return false }
            if failure == nil, case .send = action { state.postsSent += 1 }
            if failure == nil, case .hold = action { state.postsHeld += 1 }
            let failing = storeFailure != nil || (state.storeFailing && failure != nil)
            defer { state.storeFailing = failing }
            return failing != state.storeFailing
        }
        if retry {
            self.eventLoop.scheduleTask(in: Self.drainRetryDelay) { self.retryDrain(appName) }
        }
        switch drainLog {
        case .failed?:
            self.logger.error(
                "\(appName): could not deliver what it held: \(failure.map { "\($0)" } ?? ""); trying again every second",
                metadata: ["app": "\(appName)", "reason": "\(failure.map { "\($0)" } ?? "")"]
            )
        case .recovered?: self.logger.notice("\(appName): delivered what it held", metadata: ["app": "\(appName)"])
        case nil: break
        }
        guard change else { return }
        if let storeFailure {
            self.logger.error(
                "Cannot write events to the store: \(storeFailure)",
                metadata: ["app": "\(appName)", "reason": "\(storeFailure)"]
            )
        } else {
            self.logger.notice("Writing events to the store again", metadata: ["app": "\(appName)"])
        }
    }
}

/// One change to what an app holds or is sent, carried out by the store's writer thread in the order it was
/// decided (see ``StoreOperation``): memory and disk change together, or neither does.
final class EventWrite: StoreOperation, @unchecked Sendable {
    enum Action {
        /// Sent to the app at once (stored until acknowledged, unless volatile).
        case send(EventKind, EventPayload, netChange: Bool, posted: Double)
        /// Folded into what the app holds (one stored row per kind, unless volatile).
        case hold(EventKind, EventPayload, CoalescingPolicy, posted: Double)
        /// Everything held, coalesced and handed to the app (stored until acknowledged).
        case drain
    }

    private let manager: AppManager
    private let app: AppName
    private let durable: Bool
    private let action: Action
    // Written by perform, read by undo and finish: all on the store's writer thread, one after the other.
    private var undoing: (() -> Void)?
    private var events: [(id: Int64?, event: JSONValue)] = []
    /// Told the outcome once the write is on disk or failed: `nil`, a ``PostRefusal`` or a ``StoreError``.
    private let finished: (@Sendable ((any Error)?) -> Void)?

    init(manager: AppManager, app: AppName, durable: Bool, finished: (@Sendable ((any Error)?) -> Void)? = nil, _ action: Action) {
        self.manager = manager
        self.app = app
        self.durable = durable
        self.finished = finished
        self.action = action
    }

    func perform(_ transaction: StoreTransaction) throws {
        let manager = self.manager
        let app = self.app
        switch self.action {
        case .send(let kind, let payload, let netChange, let posted):
            let event = AppManager.event(kind, payload, posted: posted)
            if netChange {
                let before = manager.setBaseline(app, kind, payload)
                self.undoing = { manager.resetBaseline(app, kind, before) }
            }
            var id: Int64?
            if self.durable {
                id = try transaction.addDelivery(app: app, event: event.jsonText)
                if netChange { try transaction.setBaseline(app: app, kind: kind.value, payload: payload.value.jsonText) }
            }
            self.events = [(id, event)]
        case .hold(let kind, let payload, let policy, let posted):
            guard let folded = try manager.fold(app, kind, payload, policy, posted: posted) else { return }
            self.undoing = { manager.unfold(app, kind, to: folded.before) }
            if self.durable {
                try transaction.hold(app: app, kind: kind.value, position: folded.position, slot: EventCoding.encode(folded.after))
            }
        case .drain:
            guard let drained = manager.drain(app) else { return }
            self.undoing = { manager.restore(app, queue: drained.before) }
            var storedHeld = false
            for kind in drained.before.kinds where !drained.volatile.contains(kind) { storedHeld = true }
            if storedHeld { try transaction.clearHeld(app: app) }
            for coalesced in drained.events {
                let event = EventCoding.event(coalesced)
                guard !drained.volatile.contains(coalesced.kind) else {
                    self.events.append((nil, event))
                    continue
                }
                let id = try transaction.addDelivery(app: app, event: event.jsonText)
                if coalesced.payload != nil, drained.before.policy(of: coalesced.kind) == .netChange {
                    try transaction.setBaseline(app: app, kind: coalesced.kind.value, payload: coalesced.payload!.value.jsonText)
                }
                self.events.append((id, event))
            }
        }
    }

    var runsOneStatement: Bool {
        switch self.action {
        case .hold: return true
        case .send(_, _, let netChange, _): return !netChange
        case .drain: return false
        }
    }

    func undo() {
        self.undoing?()
        self.undoing = nil
        self.events = []
    }

    func finish(_ failure: (any Error)?) {
        self.manager.finished(self.app, self.action, sending: failure == nil ? self.events : [], failure: failure)
        self.finished?(failure)
    }
}

/// Answers a post once every app it went to has its write on disk or refused it, and the post has been handed
/// to all of them: a success when any kept it (listing those that refused), else the first refusal.
final class PostTally: Sendable {
    private struct State {
        var remaining: Int
        var sentTo: Set<AppName> = []
        var refused: [(app: AppName, error: AppError)] = []
    }

    private let state: NIOLockedValueBox<State>
    private let recipients: [AppName]
    private let target: String
    private let answer: @Sendable (AppManager.PostResult) -> Void

    init(recipients: [AppName], target: String, answer: @escaping @Sendable (AppManager.PostResult) -> Void) {
        self.state = NIOLockedValueBox(State(remaining: recipients.count + 1))
        self.recipients = recipients
        self.target = target
        self.answer = answer
    }

    /// One app's write finished.
    func finished(_ app: AppName, _ failure: (any Error)?) {
        let error: AppError? = switch failure {
        case nil: nil
        case let refusal as PostRefusal: AppError(refusal, target: self.target)
        case let failure as StoreError: .storageFailed(reason: failure.description)
        case let failure?: .storageFailed(reason: "\(failure)")
        }
        self.count { state in if let error { state.refused.append((app, error)) } }
    }

    /// Every app has been handed the post; those in `sentTo` are sent it once it is on disk.
    func decided(sentTo: Set<AppName>) {
        self.count { $0.sentTo = sentTo }
    }

    private func count(_ change: (inout State) -> Void) {
        let result = self.state.withLockedValue { state -> AppManager.PostResult? in
            change(&state)
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            // Refusals in the order of the recipients, not of the writer's answers.
            let refused = self.recipients.compactMap { app in state.refused.first { $0.app == app } }
            guard refused.count < self.recipients.count else { return .failure(refused[0].error) }
            let delivered = !state.sentTo.subtracting(refused.map(\.app)).isEmpty
            return .success(
                AppManager.PostOutcome(delivered: delivered, recipients: self.recipients.count - refused.count, refused: refused)
            )
        }
        if let result { self.answer(result) }
    }
}
