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
                break  // carried out under the lock (``inboxInput(_:of:together:_:)``)
            case .answer(let answers):
                for (ticket, answer) in answers {
                    ticket.answer(answer, failure: failure)
                }
            case .forget(let ids):
                // Not waited for: an acknowledgement lost in a crash only means the events come again.
                _ = self.store.acknowledge(app: appName, ids: ids)
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
        var decided: [(AppName, [InboxAction])] = []
        self.state.withLock { state in
            state.flushScheduled = false
            let apps = state.unflushed
            state.unflushed.removeAll(keepingCapacity: true)
            let ledger = state.ledger
            for appName in apps {
                let flushed = state.update(appName) { record -> [InboxAction] in
                    record.flushQueued = false
                    guard record.inbox.writing else {
                        return self.inboxInput(&record, of: appName, charging: ledger, together: together) { inbox, reception, next in
                            inbox.flush(reception, next: &next)
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
                self.count(actions, of: appName, in: &state)
                decided.append((appName, actions))
            }
        }
        for (appName, actions) in decided { self.carryOut(actions, of: appName, failure: nil) }
        if together { self.store.hurry() }
    }

    /// The store answered an app's write: the inbox applies it (or drops it), and what waited makes the next one.
    /// The first write the store refuses, and the first one after that it keeps, are logged; so is a refused
    /// delivery of what an app held, and its success when tried again.
    func written(_ appName: AppName, _ result: Result<[Int64], StoreError>) {
        let failure: StoreError?
        if case .failure(let error) = result { failure = error } else { failure = nil }
        var refusalLog: DeliveryLog?
        let (actions, storeLog) = self.state.withLock { state -> ([InboxAction], StoreLog?) in
            let ledger = state.ledger
            let actions = state.update(appName) { record -> [InboxAction] in
                let drained = record.inbox.draining
                record.pendingWrite = nil
                record.journalMarks.writeFinished()
                let actions = self.inboxInput(&record, of: appName, charging: ledger) { inbox, reception, next in
                    switch result {
                    case .success(let ids): inbox.written(ids: ids, reception, next: &next)
                    case .failure: inbox.writeFailed(reception, next: &next)
                    }
                }
                if drained, failure != nil, !record.deliveryRefused {
                    record.deliveryRefused = true
                    refusalLog = .refused
                } else if drained, failure == nil, record.deliveryRefused {
                    record.deliveryRefused = false
                    refusalLog = .deliveredAgain
                }
                return actions
            } ?? []
            self.count(actions, of: appName, in: &state)
            let failing = failure != nil
            defer { state.storeFailing = failing }
            guard failing != state.storeFailing else { return (actions, nil) }
            return (actions, failing ? .failing : .writingAgain)
        }
        self.carryOut(actions, of: appName, failure: failure)
        switch refusalLog {
        case .refused?:
            self.logger.error(
                "\(appName): could not deliver what it held: \(failure.map { "\($0)" } ?? ""); trying again every second",
                metadata: ["app": "\(appName)", "reason": "\(failure.map { "\($0)" } ?? "")"]
            )
        case .deliveredAgain?: self.logger.notice("\(appName): delivered what it held", metadata: ["app": "\(appName)"])
        case nil: break
        }
        switch storeLog {
        case .failing?:
            self.logger.error(
                "Cannot write events to the store: \(failure.map { "\($0)" } ?? "")",
                metadata: ["app": "\(appName)", "reason": "\(failure.map { "\($0)" } ?? "")"]
            )
        case .writingAgain?: self.logger.notice("Writing events to the store again", metadata: ["app": "\(appName)"])
        case nil: break
        }
    }

    private enum DeliveryLog { case refused, deliveredAgain }
    private enum StoreLog { case failing, writingAgain }

    /// How long after a refused delivery of what an app held it is tried again.
    static let drainRetryDelay = TimeAmount.seconds(1)

    /// Tries again to deliver what an app held, after the store refused it; an app that no longer receives gets it
    /// with its next wake instead.
    func retryDelivery(_ appName: AppName) {
        let actions = self.state.withLock { state -> [InboxAction] in
            let ledger = state.ledger
            let actions =
                state.update(appName) { record in
                    self.inboxInput(&record, of: appName, charging: ledger) { inbox, reception, next in inbox.retry(reception, next: &next) }
                } ?? []
            self.count(actions, of: appName, in: &state)
            return actions
        }
        self.carryOut(actions, of: appName, failure: nil)
    }
}
