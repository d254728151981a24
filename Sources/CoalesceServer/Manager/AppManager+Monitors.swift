import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// What a Monitor asked to see: which records, of which apps and kinds.
struct MonitorFilter: Sendable, Hashable {
    /// The records a monitor may watch, as Monitor's `watch` names them.
    struct Records: OptionSet, Sendable, Hashable {
        let rawValue: Int
        static let transitions = Records(rawValue: 1)
        static let posts = Records(rawValue: 2)
        static let deliveries = Records(rawValue: 4)
        static let acknowledgements = Records(rawValue: 8)
        static let attachments = Records(rawValue: 16)
        /// Everything besides transitions.
        static let traffic: Records = [.posts, .deliveries, .acknowledgements, .attachments]

        /// The names `watch` takes, with what each stands for.
        static let names: [(String, Records)] = [
            ("transitions", .transitions), ("posts", .posts), ("deliveries", .deliveries),
            ("acknowledgements", .acknowledgements), ("attachments", .attachments), ("traffic", .traffic),
        ]
    }

    var records: Records = .transitions
    /// Only these apps' records; `nil`: every app's.
    var apps: Set<AppName>?
    /// Only posts and deliveries of these kinds; `nil`: every record.
    var kinds: Set<EventKind>?

    var watchesTraffic: Bool { !self.records.isDisjoint(with: .traffic) }

    /// Whether a record of `record`'s sort, about `app` (and of `kind`, for a post or a delivery), is sent.
    func shows(_ record: Records, app: AppName, kind: EventKind?) -> Bool {
        guard self.records.contains(record) else { return false }
        if let apps = self.apps, !apps.contains(app) { return false }
        if let kinds = self.kinds {
            guard let kind, kinds.contains(kind) else { return false }
        }
        return true
    }
}

/// What a monitor is told of one post to one app, kept with the post's ticket while a monitor watches posts.
final class PostSeen: Sendable {
    let target: String
    let kind: EventKind
    let uid: UInt32
    /// Seconds since the Unix epoch.
    let time: Double
    /// The journal watch that made the post, if one did.
    let watch: WatchName?

    init(target: String, kind: EventKind, uid: UInt32, time: Double, watch: WatchName? = nil) {
        self.target = target
        self.kind = kind
        self.uid = uid
        self.time = time
        self.watch = watch
    }
}

/// Monitors and parked streams: who watches what happens to apps, and how a streaming call waits for its end.
///
/// Each record is told where the thing it reports is decided: a transition where the lifecycle's effects are carried
/// out (`+Lifecycle`), a post where its answer is counted (``countPostsAndTellMonitors(_:of:in:)``, sent or held as the inbox decided),
/// a delivery where the inbox's events are counted going out on the app's stream, an acknowledgement where it is
/// taken (`+AppSide`), an attach where the stream becomes the app's, and a detach where it stops being
/// (``detached(_:_:in:)``). All decided under the manager's lock and sent in the order decided, so that monitors
/// see them in the order they happened.
extension AppManager {
    /// A Monitor call: its stream, and what it asked to see.
    struct Monitor {
        var responder: VarlinkResponder
        var filter: MonitorFilter
    }

    /// Serves a Monitor until its client hangs up or stops reading.
    func monitor(_ filter: MonitorFilter, responder: VarlinkResponder) async throws(SystemError) {
        let id = self.decide { state, _ in
            let id = state.nextID
            state.nextID += 1
            state.monitoring.add(id, Monitor(responder: responder, filter: filter))
            state.parks.open(id)
            // Its first reply goes ahead of the records decided after it.
            state.outbox.add(.send(responder, [[:]]))
            return id
        }
        switch await self.park(id) {
        case .overrun: responder.failAndClose(SystemError.monitorOverrun(bound: Self.monitorBacklogBound))
        case .replaced, .closed, .finished: responder.finish()
        }
    }

    /// Sends one record to each monitor that asks for it, making its reply once; a monitor whose unread replies
    /// passed the bound is ended instead.
    func tellMonitors(
        _ record: MonitorFilter.Records,
        app: AppName,
        kind: EventKind? = nil,
        in state: inout State,
        _ reply: () -> JSONObject
    ) {
        guard !state.monitoring.isEmpty else { return }
        let overrun = state.monitoring.tell(
            record, app: app, kind: kind, bound: Self.monitorBacklogBound, into: &state.outbox, reply
        )
        for id in overrun { self.endPark(id, .overrun, in: &state) }
    }

    func tellMonitors(
        app: AppName,
        from: AppState,
        to: AppState,
        reason: TransitionReason,
        time: Double,
        state: inout State
    ) {
        self.tellMonitors(.transitions, app: app, in: &state) {
            [
                "transition": [
                    "app": .string(app.value), "from": .string(from.rawValue), "to": .string(to.rawValue),
                    "reason": .string(reason.rawValue), "time": .double(time),
                ]
            ]
        }
    }

    /// Posts the inbox answered for `app`, sent or held; a sent one with the number it went out with when it went
    /// out in `bursts` (the same input's: a post sent at once goes out once its write is on disk, as the only
    /// event of its post and kind posted at its time).
    func tellPosts(_ answers: [(ticket: PostTicket, answer: AppInbox.Answer)], to app: AppName, sentIn bursts: [[AppInbox.Sent]], in state: inout State) {
        var events = bursts.joined().makeIterator()
        for (ticket, answer) in answers {
            guard ticket.seen != 0, let seen = state.monitoring.takePost(ticket.seen) else { continue }
            let delivered: Bool
            switch answer {
            case .sent: delivered = true
            case .held: delivered = false
            case .refused, .storeFailed: continue
            }
            var seq: UInt64?
            if delivered {
                // Events go out in the order their posts were decided: search on from the last one found.
                while let sent = events.next() {
                    if sent.event.count == 1, sent.event.kind == seen.kind, sent.event.firstPosted == seen.time {
                        seq = sent.seq
                        break
                    }
                }
            }
            self.tellMonitors(.posts, app: app, kind: seen.kind, in: &state) {
                var post: JSONObject = [
                    "target": .string(seen.target), "app": .string(app.value), "kind": .string(seen.kind.value),
                    "delivered": .bool(delivered), "uid": .int(Int64(seen.uid)), "time": .double(seen.time),
                ]
                if let seq { post["seq"] = .int(Int64(bitPattern: seq)) }
                if let watch = seen.watch { post["watch"] = .string(watch.value) }
                return ["post": .object(post)]
            }
        }
    }

    /// Events that went out on `app`'s stream.
    func tellDeliveries(_ burst: [AppInbox.Sent], of app: AppName, in state: inout State) {
        let time = self.wall()
        for sent in burst {
            self.tellMonitors(.deliveries, app: app, kind: sent.event.kind, in: &state) {
                [
                    "delivery": [
                        "app": .string(app.value), "kind": .string(sent.event.kind.value),
                        "seq": .int(Int64(bitPattern: sent.seq)), "count": .int(Int64(sent.event.count)),
                        "time": .double(time),
                    ]
                ]
            }
        }
    }

    /// A process's stream stopped being the app's: it closed, the daemon ended it, or another attach replaced it.
    func detached(_ app: AppName, _ attachment: Attachment, in state: inout State) {
        self.tellMonitors(.attachments, app: app, in: &state) {
            ["detach": ["app": .string(app.value), "pid": .int(Int64(attachment.pid)), "time": .double(self.wall())]]
        }
    }

    /// Ends an app's stream with its last reply: the app is not running any more.
    func endStream(_ attachment: Attachment, in state: inout State) {
        if let app = state.attached.removeValue(forKey: attachment.id) { self.detached(app, attachment, in: &state) }
        state.outbox.add(.finish(attachment.responder, ["state": "notRunning"]))
        self.endPark(attachment.id, .finished, in: &state)
    }

    // MARK: Parked streams

    func park(_ id: Int) async -> StreamEnd {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<StreamEnd, Never>) in
                let ended = self.state.withLock { $0.parks.wait(id, continuation) }
                if let ended { continuation.resume(returning: ended) }
            }
        } onCancel: {
            // Cancellation may run inside a write to a peer that is gone (closing the channel cancels the call's
            // task): no write is made under the lock, and a decision made while this thread carries actions out
            // queues behind them.
            self.streamClosed(id)
        }
    }

    /// A parked stream's client went away. For an attached app that means its process is gone, unless the daemon
    /// is stopping and closed the stream itself: then the app keeps its state (as recorded) for the next start.
    func streamClosed(_ id: Int) {
        self.decide { state, log in
            state.monitoring.remove(id)
            state.windows.removeFocusStream(id)
            if let appName = state.attached.removeValue(forKey: id), let attachment = state.records[appName]?.attachment,
                attachment.id == id
            {
                state.records[appName]!.attachment = nil
                self.detached(appName, attachment, in: &state)
                if !state.stopping {
                    let now = self.now()
                    self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now) }
                }
            }
            self.endPark(id, .closed, in: &state)
        }
    }

    func endPark(_ id: Int, _ end: StreamEnd, in state: inout State) {
        state.parks.end(id, end, into: &state.outbox)
    }
}
