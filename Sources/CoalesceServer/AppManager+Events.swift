import CoalesceCore
import CoalesceStore
import CoalesceWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
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
            switch self.enqueuePost(appName, post, checking: peer.uid, finished: finished) {
            case .unknownApp: throw .unknownTarget(target: target)
            case .notAllowed: throw .notAllowedToPost(target: target)
            case .groupsDecide(let recipient):
                guard recipient.allows(peer) else { throw .notAllowedToPost(target: target) }
                self.enqueuePost(appName, post, finished: finished)
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
            self.enqueuePost(recipient.app, post) { sent, failure in tally.finished(recipient.app, sent: sent, failure) }
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
    private struct Recipient {
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
    private enum Enqueued {
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
    /// the store is applied here and now. `finished` is called once it is, unless it was not taken. A held post
    /// of a kind that wakes the app launches it.
    ///
    /// With `posterUID`, who posts is checked first, in the same look at the app's record: one lookup and one lock
    /// for a post to one app.
    @discardableResult
    private func enqueuePost(
        _ appName: AppName,
        _ post: Post,
        checking posterUID: UInt32? = nil,
        finished: @escaping @Sendable (_ sent: Bool, (any Error)?) -> Void
    ) -> Enqueued {
        var refusal: PostRefusal?
        var sent = false
        var launches = false
        let (outcome, write) = self.state.withLock { state -> (Enqueued, EventWrite?) in
            var counted: (sent: Int, held: Int) = (0, 0)
            defer {
                state.postsSent += counted.sent
                state.postsHeld += counted.held
            }
            return state.update(appName) { record -> (Enqueued, EventWrite?) in
                if let posterUID {
                    let recipient = Recipient(record, appName, uid: posterUID)
                    switch recipient.permission {
                    case .allowed: break
                    case .denied: return (.notAllowed, nil)
                    case .byGroup: return (.groupsDecide(recipient), nil)
                    }
                }
                // The kind's declaration, looked up once for its policy, its volatility and the mode it wakes into.
                let declared = record.declarations.kinds[post.kind]
                let write: EventWrite?
                (sent, write) = self.enqueue(
                    appName, post, declared, &record, counted: &counted, refusal: &refusal, finished: finished
                )
                launches = !sent && declared?.backgroundMode != nil
                return (.enqueued, write)
            } ?? (.unknownApp, nil)
        }
        guard case .enqueued = outcome else { return outcome }
        if write == nil { finished(sent, refusal) }
        if launches { self.launchForEvent(appName) }
        return outcome
    }

    /// The part of ``enqueuePost(_:_:checking:finished:)`` done on the app's record, under the lock: whether the
    /// post is sent at once, and the write it went into (`nil`: applied already, or refused with `refusal`).
    private func enqueue(
        _ appName: AppName,
        _ post: Post,
        _ declared: KindDeclaration?,
        _ record: inout Record,
        counted: inout (sent: Int, held: Int),
        refusal: inout PostRefusal?,
        finished: @escaping @Sendable (_ sent: Bool, (any Error)?) -> Void
    ) -> (Bool, EventWrite?) {
        let posted = wallClock()
        let durable = !(declared?.volatile ?? false)
        let policy = post.policy ?? declared?.policy ?? .latest
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
                .send(post.kind, post.payload, policy: policy, posted: posted)
            )
            record.sendsInFlight += 1
        } else {
            let hold = EventWrite.Hold(payload: post.payload, policy: policy, posted: posted, finished: finished)
            record.holdsInFlight += 1
            // Nothing of the app's comes between: the post goes into that write, in the same order.
            if let last = record.lastWrite, last.join(post.kind, durable: durable, hold) { return (false, last) }
            write = EventWrite(manager: self, app: appName, durable: durable, .hold(post.kind), holding: hold)
        }
        record.lastWrite = write
        self.submit(write)
        return (sendsNow, write)
    }

    /// Hands an event write to the store. On an event loop, the writes decided in one pass of the loop (a read's
    /// pipelined posts) go to the store together at the end of the pass: one transaction and one fsync for all of
    /// them, rather than one for the first and another for the rest.
    private func submit(_ write: EventWrite) {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return self.store.submit(write) }
        self.store.submitTogether(write)
        let store = self.store
        loop.execute { store.hurry() }
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
            var burst: [JSONObject] = []
            for (_, id, event) in unacked {
                let seq = record.lifecycle.reserveSequence()
                burst.append(Self.reply(event, seq: seq, state: record.lifecycle.state))
                record.unacked.append((seq, id, event))
            }
            attachment.responder.send(all: burst)
        }
        self.sendUndelivered(&record)
        self.deliverHeld(appName, &record)
    }

    /// Sends what was written for the app and not yet sent, if it receives now.
    private func sendUndelivered(_ record: inout Record) {
        guard record.lifecycle.receivesAtOnce, let attachment = record.attachment, !record.redeliver, !record.drainFailed
        else { return }
        // One write for them all: a wake's events reach the app as one burst (its library acknowledges a burst once).
        var burst: [JSONObject] = []
        for (id, event) in record.undelivered {
            let seq = record.lifecycle.reserveSequence()
            burst.append(Self.reply(event, seq: seq, state: record.lifecycle.state))
            if id != nil { record.unacked.append((seq, id, event)) }
        }
        attachment.responder.send(all: burst)
        record.undelivered.removeAll()
    }

    /// Hands what the app holds (and what posts on their way will add) to the store to be delivered, unless that
    /// is already on its way.
    private func deliverHeld(_ appName: AppName, _ record: inout Record) {
        // After a refused delivery, even with nothing held: one that succeeds lets what waits behind it go.
        guard !record.drainInFlight, !record.queue.isEmpty || record.holdsInFlight > 0 || record.drainFailed else { return }
        record.drainInFlight = true
        let write = EventWrite(manager: self, app: appName, durable: true, .drain)
        record.lastWrite = write
        self.submit(write)
    }

    /// The app has handled what it was sent up to `sequence`: those events leave the store. An app that had fallen
    /// behind and caught up gets what was held meanwhile.
    func acknowledgeEvents(_ appName: AppName, upTo sequence: UInt64, in state: inout State) {
        _ = state.update(appName) { record in
            guard record.unacked.first.map({ $0.seq <= sequence }) == true else { return }
            let handled = record.unacked.prefix { $0.seq <= sequence }
            let ids = handled.compactMap(\.id)
            record.unacked.removeFirst(handled.count)
            // Not waited for: an acknowledgement lost in a crash only means the events come again.
            if !ids.isEmpty { _ = self.store.acknowledge(app: appName, ids: ids) }
            if record.lifecycle.receivesAtOnce, record.unacked.count < Self.maximumUnacknowledged / 2, !record.drainFailed {
                self.deliverHeld(appName, &record)
            }
        }
    }

    /// The stream reply that sends an event numbered `seq`.
    static func reply(_ event: JSONValue, seq: UInt64, state: AppState) -> JSONObject {
        var callback = event.objectValue ?? [:]
        callback["seq"] = .int(Int64(bitPattern: seq))
        return ["state": .string(state.rawValue), "callback": .object(callback)]
    }

    /// What an app holds, kind by kind in order of first post, and how many events it has not acknowledged.
    func queue(of name: String) throws(SystemError) -> (held: [(kind: EventKind, slot: EventCoding.Queue.Slot)], unacknowledged: Int) {
        let appName = try Self.systemAppName(name)
        return try self.state.withLock { state throws(SystemError) in
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

    /// Folds posts of one kind into what the app holds, in order; returns the kind's slot as it was (for undo) and
    /// each post's refusal (a refused post changes nothing).
    fileprivate func fold(
        _ appName: AppName,
        _ kind: EventKind,
        _ holds: [EventWrite.Hold]
    ) -> (before: EventCoding.Queue.Slot?, refusals: [PostRefusal?])? {
        self.state.withLock { state in
            state.update(appName) { record in
                let before = record.queue.slot(of: kind)
                var refusals: [PostRefusal?] = []
                for (index, hold) in holds.enumerated() {
                    do throws(PostRefusal) {
                        try record.queue.post(kind, hold.payload, policy: hold.policy, at: hold.posted)
                    } catch {
                        if refusals.isEmpty { refusals = Array(repeating: nil, count: holds.count) }
                        refusals[index] = error
                    }
                }
                return (before, refusals)
            }
        }
    }

    /// What the app holds of a kind, with the kind's position among those it holds (which orders a new kind's row).
    fileprivate func held(_ appName: AppName, _ kind: EventKind) -> (slot: EventCoding.Queue.Slot, position: Int)? {
        self.state.withLock { state in
            state.update(appName) { record in
                guard let slot = record.queue.slot(of: kind), let position = record.queue.kinds.firstIndex(of: kind) else {
                    return nil
                }
                return (slot, position)
            } ?? nil
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
                let volatile = Set(record.declarations.kinds.lazy.filter(\.value.volatile).map(\.key))
                return (before, record.queue.drain(), volatile)
            }
        }
    }

    /// Puts back what a refused drain took, and marks the app's delivery refused at once, so that a send after it
    /// in the same batch is held behind it. Returns whether it was not marked already.
    fileprivate func restore(_ appName: AppName, queue: EventCoding.Queue) -> Bool {
        self.state.withLock { state in
            state.update(appName) { record in
                record.queue = queue
                defer { record.drainFailed = true }
                return !record.drainFailed
            } ?? false
        }
    }

    /// Whether the app's last wake's delivery of what it held was refused and waits to be tried again.
    fileprivate func drainRefused(_ appName: AppName) -> Bool {
        self.state.withLock { $0.records[appName]?.drainFailed ?? false }
    }

    /// A write finished: its events go out in the order they were written, if the app receives now; otherwise
    /// they wait for it. The first write the store refuses, and the first one after that it keeps, are logged.
    fileprivate func finished(
        _ write: EventWrite,
        _ appName: AppName,
        _ action: EventWrite.Action,
        sending events: [(id: Int64?, event: JSONValue)],
        held: Int = 0,
        keptHeld: Int = 0,
        failure: (any Error)?
    ) {
        let storeFailure = failure as? StoreError
        var retry = false
        var drainLog: DrainLog?
        let change = self.state.withLock { state -> Bool in
            let succeeded = state.update(appName) { record -> Bool in
                // Done with: nothing joins it any more, and the record need not keep it (nor, through it, us).
                if record.lastWrite === write { record.lastWrite = nil }
                switch action {
                case .send:
                    record.sendsInFlight -= 1
                    record.undelivered.append(contentsOf: events)
                case .hold: record.holdsInFlight -= held
                case .drain:
                    record.drainInFlight = false
                    if failure != nil {
                        // The held events stay held, in memory and on disk (its undo marked the delivery refused);
                        // logged the first time, tried again.
                        if write.refusedFirst || !record.drainFailed { drainLog = .failed }
                        record.drainFailed = true
                        retry = true
                    } else {
                        if record.drainFailed {
                            drainLog = .recovered  // a retry
                            record.drainFailed = false
                        }
                        // What waits to be sent was written before this delivery: a send carried out after a
                        // refused one was held instead (see ``EventWrite/Action/send(_:_:policy:posted:)``).
                        record.undelivered.append(contentsOf: events)
                    }
                }
                self.sendUndelivered(&record)
                return failure == nil
            }
            guard succeeded != nil else { return false }
            if failure == nil, case .send = action {
                if write.heldInstead { state.postsHeld += 1 } else { state.postsSent += 1 }
            }
            if case .hold = action { state.postsHeld += keptHeld }
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
///
/// A hold takes in later posts to the same kind while it is still the app's last write and the store has not
/// taken it: a producer's burst to one kind costs the writer one operation and one fold pass, not one of each per
/// post. Each post keeps its own answer (a refusal of one, say a sum without its number, leaves the others); if
/// the write fails, every post in it fails and memory goes back to before the first.
final class EventWrite: StoreOperation, @unchecked Sendable {
    enum Action {
        /// Sent to the app at once (stored until acknowledged, unless volatile); held instead (with `policy`) when
        /// the wake's delivery before it was refused by the time the store carries it out.
        case send(EventKind, EventPayload, policy: CoalescingPolicy, posted: Double)
        /// Posts folded into what the app holds of a kind (one stored row per kind, unless volatile).
        case hold(EventKind)
        /// Everything held, coalesced and handed to the app (stored until acknowledged).
        case drain
    }

    /// One post a hold folds in.
    struct Hold {
        var payload: EventPayload
        var policy: CoalescingPolicy
        var posted: Double
        var finished: @Sendable (_ sent: Bool, (any Error)?) -> Void
    }

    /// What perform changed in memory, for undo.
    private enum Undo {
        case slot(EventKind, EventCoding.Queue.Slot?)
        case baseline(EventKind, EventPayload?)
        case queue(EventCoding.Queue)
    }

    /// A hold's posts: more join until the store takes the write (``perform(_:)`` closes it).
    private struct Joined {
        var holds: [Hold] = []
        var closed = false
    }

    private let manager: AppManager
    private let app: AppName
    private let durable: Bool
    private let action: Action
    private let joined: Mutex<Joined>
    // Written by perform, read by undo and finish: all on the store's writer thread, one after the other.
    private var undoing: Undo?
    private var events: [(id: Int64?, event: JSONValue)] = []
    private var holds: [Hold] = []
    private var refusals: [PostRefusal?] = []
    /// A send that was held instead (see ``Action/send(_:_:policy:posted:)``).
    fileprivate private(set) var heldInstead = false
    /// A drain whose undo was the first to mark the app's delivery refused (logged once).
    fileprivate private(set) var refusedFirst = false
    /// Told, once the write is on disk or failed, whether it sends the event and the outcome: `nil`, a
    /// ``PostRefusal`` or a ``StoreError``.
    private let finished: (@Sendable (_ sent: Bool, (any Error)?) -> Void)?

    init(
        manager: AppManager,
        app: AppName,
        durable: Bool,
        finished: (@Sendable (_ sent: Bool, (any Error)?) -> Void)? = nil,
        _ action: Action,
        holding hold: Hold? = nil
    ) {
        self.manager = manager
        self.app = app
        self.durable = durable
        self.finished = finished
        self.action = action
        self.joined = Mutex(Joined(holds: hold.map { [$0] } ?? []))
    }

    /// Adds a post to this hold unless the store has taken it, or it holds another kind (or is not a hold).
    func join(_ kind: EventKind, durable: Bool, _ hold: Hold) -> Bool {
        guard case .hold(let held) = self.action, held == kind, durable == self.durable else { return false }
        return self.joined.withLock { joined in
            guard !joined.closed else { return false }
            joined.holds.append(hold)
            return true
        }
    }

    func perform(_ transaction: StoreTransaction) throws {
        let manager = self.manager
        let app = self.app
        switch self.action {
        case .send(let kind, let payload, let policy, let posted):
            // Decided while the wake's delivery of what the app held was on its way, which has since been refused:
            // sent, it would be stored as a delivery ahead of those older held events, and after a restart go out
            // before them. Held behind them instead, it keeps its place.
            if manager.drainRefused(app) {
                let hold = Hold(payload: payload, policy: policy, posted: posted) { _, _ in }
                guard let folded = manager.fold(app, kind, [hold]) else { return }
                if let refusal = folded.refusals.first ?? nil { throw refusal }
                self.undoing = .slot(kind, folded.before)
                self.heldInstead = true
                if self.durable { try self.writeHeld(kind, transaction) }
                return
            }
            let netChange = policy == .netChange
            let event = AppManager.event(kind, payload, posted: posted)
            if netChange {
                self.undoing = .baseline(kind, manager.setBaseline(app, kind, payload))
            }
            var id: Int64?
            if self.durable {
                id = try transaction.addDelivery(app: app, event: event.jsonText)
                if netChange { try transaction.setBaseline(app: app, kind: kind.value, payload: payload.value.jsonText) }
            }
            self.events = [(id, event)]
        case .hold(let kind):
            self.holds = self.joined.withLock { joined in
                joined.closed = true
                defer { joined.holds = [] }
                return joined.holds
            }
            // Memory only: the kind's row is written once for the batch's posts to it (``writeRow(_:)``).
            guard let folded = manager.fold(app, kind, self.holds) else { return }
            self.refusals = folded.refusals
            self.undoing = .slot(kind, folded.before)
        case .drain:
            guard let drained = manager.drain(app) else { return }
            self.undoing = .queue(drained.before)
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

    var row: StoreRow? {
        guard self.durable, case .hold(let kind) = self.action else { return nil }
        return StoreRow(app: self.app, kind: kind.value)
    }

    func writeRow(_ transaction: StoreTransaction) throws {
        guard case .hold(let kind) = self.action else { return }
        try self.writeHeld(kind, transaction)
    }

    /// Writes the kind's row as memory holds it now.
    private func writeHeld(_ kind: EventKind, _ transaction: StoreTransaction) throws {
        guard let held = self.manager.held(self.app, kind) else { return }
        try transaction.hold(app: self.app, kind: kind.value, position: held.position, slot: EventCoding.encode(held.slot))
    }

    var runsOneStatement: Bool {
        switch self.action {
        case .hold: return true
        case .send(_, _, let policy, _): return policy != .netChange
        case .drain: return false
        }
    }

    func undo() {
        switch self.undoing {
        case .slot(let kind, let slot)?: self.manager.unfold(self.app, kind, to: slot)
        case .baseline(let kind, let payload)?: self.manager.resetBaseline(self.app, kind, payload)
        case .queue(let queue)?: self.refusedFirst = self.manager.restore(self.app, queue: queue)
        case nil: break
        }
        self.undoing = nil
        self.events = []
        self.refusals = []
        self.heldInstead = false
    }

    func finish(_ failure: (any Error)?) {
        guard case .hold = self.action else {
            self.manager.finished(self, self.app, self.action, sending: failure == nil ? self.events : [], failure: failure)
            if case .send = self.action { self.finished?(!self.heldInstead, failure) } else { self.finished?(false, failure) }
            return
        }
        // Each post's own refusal, or the write's failure, or kept. A write whose batch failed before reaching it
        // was never performed: the posts that joined it are still in `joined`, and fail with it.
        let unperformed = self.joined.withLock { joined in
            joined.closed = true
            defer { joined.holds = [] }
            return joined.holds
        }
        // Nearly always none joined unperformed: the holds are then answered where they are, not copied.
        let holds = unperformed.isEmpty ? self.holds : self.holds + unperformed
        self.holds = []
        func outcome(_ index: Int) -> (any Error)? {
            failure ?? (index < self.refusals.count ? self.refusals[index] : nil)
        }
        let kept = holds.indices.count { outcome($0) == nil }
        self.manager.finished(self, self.app, self.action, sending: [], held: holds.count, keptHeld: kept, failure: failure)
        for (index, hold) in holds.enumerated() { hold.finished(false, outcome(index)) }
    }
}

/// Answers a post to a topic once every subscriber it went to has its write on disk or refused it: a success when
/// any kept it (listing those that refused), else the first refusal.
final class PostTally: Sendable {
    private struct State {
        var remaining: Int
        var sent = false
        var refused: [(app: AppName, error: AppError)] = []
    }

    private let state: NIOLockedValueBox<State>
    private let recipients: [AppName]
    private let target: String
    private let answer: @Sendable (AppManager.PostResult) -> Void

    init(recipients: [AppName], target: String, answer: @escaping @Sendable (AppManager.PostResult) -> Void) {
        self.state = NIOLockedValueBox(State(remaining: recipients.count))
        self.recipients = recipients
        self.target = target
        self.answer = answer
    }

    /// One subscriber's write finished; `sent` says whether it sends the event.
    func finished(_ app: AppName, sent: Bool, _ failure: (any Error)?) {
        let result = self.state.withLockedValue { state -> AppManager.PostResult? in
            if let failure {
                state.refused.append((app, AppManager.postError(failure, target: self.target)))
            } else if sent {
                state.sent = true
            }
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            // Refusals in the order of the recipients, not of the writer's answers.
            let refused = self.recipients.compactMap { app in state.refused.first { $0.app == app } }
            guard refused.count < self.recipients.count else { return .failure(refused[0].error) }
            return .success(
                AppManager.PostOutcome(delivered: state.sent, recipients: self.recipients.count - refused.count, refused: refused)
            )
        }
        if let result { self.answer(result) }
    }
}
