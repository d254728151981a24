import CoalesceCore
import CoalesceStore
import CoalesceWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Varlink

/// Writes: what an inbox decided, carried out outside the lock. Posts that come together make their writes at the
/// end of the event loop's pass, one transaction for every app they touched; the store's answer goes back to each
/// app's inbox, and a refused delivery is tried again.
extension AppManager {
    /// Carries out what an inbox decided, outside the lock: writes to the store, answers to the posters,
    /// acknowledged events forgotten, a retry armed. `failure` is the store's error of the write being answered.
    func carryOut(_ actions: [InboxAction], of appName: AppName, failure: StoreError?) {
        let failure = failure ?? self.writeRefused
        for action in actions {
            switch action {
            case .write, .send:
                break  // queued as they were decided (``inboxInput(_:of:charging:together:outbox:_:)``)
            case .answer(let answers):
                for (ticket, answer) in answers {
                    ticket.answer(answer, failure: failure)
                }
            case .forget(let ids):
                // Not waited for: an acknowledgement lost in a crash only means the events come again.
                self.store.acknowledge(app: appName, ids: ids).whenFinished { self.writes.report("events", $0) }
            case .retryLater:
                self.eventLoop.scheduleTask(in: Self.drainRetryDelay) { self.retryDelivery(appName) }
            }
        }
    }

    static func storeRow(_ row: AppInbox.Row) -> EventRow {
        switch row {
        case .hold(let kind, let position, let slot): .hold(kind: kind.value, position: position, slot: EventCoding.encode(slot))
        case .enqueue(let kind, let entry):
            .enqueue(kind: kind.value, serial: entry.serial, posted: entry.posted, payload: entry.payload.value.jsonText)
        case .dropQueued(let kind, let before): .dropQueued(kind: kind.value, before: before)
        case .clearHeld: .clearHeld
        case .delivery(let event): .delivery(event: EventCoding.event(event).jsonText)
        case .baseline(let kind, let payload): .baseline(kind: kind.value, payload: payload.value.jsonText)
        }
    }

    /// Makes the writes of the apps whose posts wait, once the posts that came together are in: at the end of the
    /// event loop's pass, or at once off a loop.
    func scheduleFlush() {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return self.flushInboxes() }
        let first = self.state.withLock { state in
            defer { state.flushScheduled = true }
            return !state.flushScheduled
        }
        guard first else { return }
        loop.execute { self.flushInboxes() }
    }

    /// Each app with posts waiting makes its write, or, while its write waits for the store to begin it, a
    /// replacement of it with them; the writes go to the store together, in one transaction. Posts to an app whose
    /// write the store has begun wait for its answer.
    func flushInboxes() {
        let together = MultiThreadedEventLoopGroup.currentEventLoop != nil
        self.decide { state, _ in
            state.flushScheduled = false
            let apps = state.unflushed
            state.unflushed.removeAll(keepingCapacity: true)
            let ledger = state.ledger
            for appName in apps {
                let flushed = state.deciding(appName) { record, outbox -> [InboxAction] in
                    record.flushQueued = false
                    guard record.inbox.writing else {
                        return self.inboxInput(&record, of: appName, charging: ledger, together: together, outbox: &outbox) {
                            inbox, reception, next in inbox.flush(reception, next: &next)
                        }
                    }
                    let write = record.pendingWrite
                    let footprint = record.inbox.footprint
                    defer { ledger.charge(record.account, record.inbox.footprint - footprint) }
                    let marks = record.journalMarks.joiningWrite()
                    let actions = record.inbox.join(Self.reception(record, ledger)) { change in
                        write?.replace(keepingFirst: change.kept, with: change.added.map(Self.storeRow) + marks) ?? false
                    }
                    // Joined: the posts waiting went into the write, and their positions with them.
                    if !record.inbox.hasWaiting { record.journalMarks.joined() }
                    return actions
                }
                guard let actions = flushed, !actions.isEmpty else { continue }
                state.inboxActions.append((appName, actions))
            }
            // After the writes it submits: the store begins them together.
            if together { state.outbox.add(.hurryStore) }
        }
    }

    /// The store answered an app's write: the inbox applies it (or drops it), and what waited makes the next one.
    /// The answer goes to the daemon's one ``WriteRefusal`` (``StoreWrites``), which says when the store starts
    /// refusing and when it keeps writes again; a refused delivery of what an app held is logged too, and its success
    /// when tried again.
    func written(_ appName: AppName, _ result: Result<[Int64], StoreError>) {
        let failure: StoreError?
        if case .failure(let error) = result { failure = error } else { failure = nil }
        let reason = failure.map { "\($0)" } ?? ""
        self.decide { state, log in
            let ledger = state.ledger
            var delivery: DeliveryLog?
            var wakes = false
            let actions = state.deciding(appName) { record, outbox -> [InboxAction] in
                let drained = record.inbox.draining
                record.pendingWrite = nil
                record.journalMarks.writeFinished()
                let actions = self.inboxInput(&record, of: appName, charging: ledger, outbox: &outbox) { inbox, reception, next in
                    switch result {
                    case .success(let ids): inbox.written(ids: ids, reception, next: &next)
                    case .failure: inbox.writeFailed(reception, next: &next)
                    }
                }
                if drained, failure != nil, !record.deliveryRefused {
                    record.deliveryRefused = true
                    delivery = .refused
                } else if drained, failure == nil, record.deliveryRefused {
                    record.deliveryRefused = false
                    delivery = .deliveredAgain
                }
                // What the write kept may be what wakes the app.
                wakes = failure == nil && Self.holdsWhatWakes(record)
                return actions
            } ?? []
            self.countPostsAndTellMonitors(actions, of: appName, in: &state)
            state.own.append(.carryOut(appName, actions, failure: failure))
            if wakes { self.wake(appName, in: &state, log: &log) }
            switch delivery {
            case .refused?:
                log.append(LogEntry(
                    level: .error, message: "\(appName): could not deliver what it held: \(reason); trying again every second",
                    metadata: ["app": "\(appName)", "reason": "\(reason)"]
                ))
            case .deliveredAgain?:
                log.append(LogEntry(level: .notice, message: "\(appName): delivered what it held", metadata: ["app": "\(appName)"]))
            case nil: break
            }
            if let notice = self.writes.answered("events", failure) {
                let (level, message, metadata) = StoreWrites.entry(notice, metadata: ["app": "\(appName)"])
                log.append(LogEntry(level: level, message: message, metadata: metadata))
            }
        }
    }

    private enum DeliveryLog { case refused, deliveredAgain }

    /// How long after a refused delivery of what an app held it is tried again.
    static let drainRetryDelay = TimeAmount.nanoseconds(WriteRefusal.retryDelay.nanoseconds)

    /// Tries again to deliver what an app held, after the store refused it; an app that no longer receives gets it
    /// with its next wake instead.
    func retryDelivery(_ appName: AppName) {
        self.decide { state, _ in
            let ledger = state.ledger
            let actions = state.deciding(appName) { record, outbox in
                self.inboxInput(&record, of: appName, charging: ledger, outbox: &outbox) { inbox, reception, next in
                    inbox.retry(reception, next: &next)
                }
            }
            if let actions { state.inboxActions.append((appName, actions)) }
        }
    }
}
