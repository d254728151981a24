import CoalesceCore
import CoalesceWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// The app side: what an app's own process asks (io.coalesced.App), its stream, its acknowledgements, its tasks.
extension AppManager {
    // MARK: The app side

    /// Serves an Attach until its stream ends: sends the current state, launches the app if it was not running,
    /// and then parks until the client hangs up, the app ends, or another Attach replaces this one.
    /// - Parameter process: the peer's process (``ProcessHandle/connected(_:)``), `nil` where it cannot be had.
    func attach(name: String, peer: VarlinkPeer, process: (any AppProcess)?, responder: VarlinkResponder) async throws(AppError) {
        let appName = try Self.appName(name)
        if self.store.owesStartWrites {
            // This start's sequence numbers go out only once its generation is on disk (Store.generation). An app
            // that may not attach hears that first, not that the disk is full.
            let refusal = self.state.withLock { state -> AppError? in
                do throws(AppError) {
                    _ = try self.appRecord(appName, uid: peer.uid, in: state)
                    return nil
                } catch {
                    return error
                }
            }
            if let refusal { throw refusal }
            do {
                try await self.store.writeWhatTheStartOwes()
            } catch {
                throw .storageFailed(reason: error.description)
            }
        }
        // Read only when the attach is going to launch the app: a running app's new stream needs none.
        var restored: String?
        let launches = self.state.withLock { state in
            state.records[appName].map { $0.lifecycle.state == .notRunning || ($0.attachment == nil && $0.restored != nil) }
        }
        if launches == true {
            do {
                restored = try self.store.savedState(of: appName)
            } catch {
                throw .storageFailed(reason: error.description)
            }
        }
        let identity = process?.identity
        let id = try self.decide { state, log throws(AppError) in
            var record = try self.appRecord(appName, uid: peer.uid, in: state)
            let id = state.nextID
            state.nextID += 1
            var unsent: [JSONObject] = []
            if let waiting = record.restored {
                // The process that ran the app before the daemon's restart: it goes on where it was, and hears what
                // happened meanwhile. Any other: that process is not coming back, and this one is launched.
                if waiting.timeoutArmed { state.outbox.add(self.arming(.reattach(appName), after: nil)) }
                record.restored = nil
                state.records[appName] = record
                if waiting.identity == identity {
                    unsent = waiting.unsent
                } else {
                    let now = self.now()
                    self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now, reason: .notReattached) }
                }
                record = state.records[appName]!
            }
            if let previous = record.attachment {
                // The old stream ends with Replaced; the app keeps running, now in the new stream's process.
                state.attached[previous.id] = nil
                self.detached(appName, previous, in: &state)
                self.endPark(previous.id, .replaced, in: &state)
                log.append(
                    LogEntry(
                        level: .info,
                        message: "\(appName): attach replaced by pid \(peer.pid)",
                        metadata: ["app": "\(appName)", "pid": "\(peer.pid)", "previous_pid": "\(previous.pid)"]
                    )
                )
            }
            record.attachment = Attachment(id: id, responder: responder, process: process, pid: peer.pid, identity: identity)
            record.termination = nil  // a new process: the old one's end runs on its own timers
            record.inbox.attached()
            self.tellMonitors(.attachments, app: appName, in: &state) {
                ["attach": ["app": .string(appName.value), "pid": .int(Int64(peer.pid)), "time": .double(self.wall())]]
            }
            state.outbox.add(.send(responder, [["state": .string(record.lifecycle.state.rawValue)]] + unsent))
            if record.lifecycle.receivesAtOnce { self.beganReceiving(appName, &record, woken: false, in: &state) }
            state.records[appName] = record
            state.attached[id] = appName
            state.parks.open(id)
            guard record.lifecycle.state == .notRunning else {
                self.recordState(appName, record, in: &state)  // its process may be another one now
                // A process it replaced, held while suspended, is continued; this one is held after the delay.
                self.settleSuspension(appName, in: &state, log: &log)
                self.matchReportedWindows(of: appName, in: &state, log: &log)
                // What came for it while no process was attached may wake it now.
                if let attached = state.records[appName], Self.holdsWhatWakes(attached) { self.wake(appName, in: &state, log: &log) }
                return id
            }
            // Not running: a pending Launch says where it goes; otherwise its user opened it.
            let pending = record.pendingLaunch
            let destination = pending?.destination ?? .foreground
            let now = self.now()
            if destination == .foreground { self.clearForeground(except: appName, now: now, in: &state, log: &log) }
            let launch = LaunchOptions(
                destination: destination,
                reason: pending?.reason ?? .user,
                // Not running: its reason is why its last process ended.
                restoration: .after(record.reason, hasSavedState: restored != nil),
                restoredState: restored
            )
            self.input(appName, in: &state, log: &log, launch: launch) { lifecycle throws(LifecycleError) in
                try lifecycle.launch(destination, now: now)
            } onError: { _ in }  // a not-running app can always be launched
            if let pending {
                state.outbox.add(self.arming(.launch(appName), after: nil))
                state.records[appName]!.pendingLaunch = nil
                state.outbox.add(.answerLaunch(pending.waiters, nil))
                // Launched for a refresh: held for it from the launch on, before it can acknowledge anything.
                if case .refresh(let id) = pending.reason { self.holdForRefresh(appName, id: id, in: &state) }
            }
            self.matchReportedWindows(of: appName, in: &state, log: &log)
            return id
        }
        switch await self.park(id) {
        case .replaced: throw .replaced(app: name)
        // Only a monitor's stream overruns; an app's ends with the app.
        case .overrun, .closed, .finished: responder.finish(["state": "notRunning"])
        }
    }

    /// The app has handled everything up to `sequence`.
    func acknowledge(name: String, uid: UInt32, upTo sequence: UInt64) throws(AppError) {
        let appName = try Self.appName(name)
        let waiters = try self.decide { state, log throws(AppError) -> [CheckedContinuation<Bool, Never>] in
            // The record is looked at, not kept: a copy held on would make the inbox's changes below copy it.
            let termination = try { () throws(AppError) in
                let record = try self.appRecord(appName, uid: uid, in: state)
                do throws(LifecycleError) {
                    try record.lifecycle.checkAcknowledgement(upTo: sequence)
                } catch {
                    throw AppError(error, app: appName, state: record.lifecycle.state)
                }
                return record.termination
            }()
            self.tellMonitors(.acknowledgements, app: appName, in: &state) {
                [
                    "acknowledgement": [
                        "app": .string(appName.value), "seq": .int(Int64(bitPattern: sequence)), "time": .double(self.wall()),
                    ]
                ]
            }
            if let termination, sequence >= termination.sequence {
                state.records[appName]!.termination = nil
                state.outbox.add(.terminationAcknowledged(termination))
            }
            let ledger = state.ledger
            let decided = state.deciding(appName) { record, outbox in
                record.suspension.acknowledged = max(record.suspension.acknowledged, sequence)
                return self.inboxInput(&record, of: appName, charging: ledger, outbox: &outbox) { inbox, reception, next in
                    inbox.acknowledged(upTo: sequence, reception, next: &next)
                }
            }
            if let decided { state.inboxActions.append((appName, decided)) }
            let now = self.now()
            self.input(appName, in: &state, log: &log) { lifecycle in
                lifecycle.acknowledge(upTo: sequence, now: now)
            }
            return state.acknowledgementWaiters.isEmpty ? [] : state.acknowledgementWaiters.take(of: appName, upTo: sequence)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    func beginBackgroundTask(name: String, uid: UInt32, taskName: String) throws(AppError) -> (id: Int, remaining: Duration?) {
        let appName = try Self.appName(name)
        return try self.decide { state, log throws(AppError) in
            var record = try self.appRecord(appName, uid: uid, in: state)
            let now = self.now()
            do throws(LifecycleError) {
                let task = try record.lifecycle.beginBackgroundTask(name: taskName, now: now)
                self.reschedule(appName, &record, now: now, in: &state)
                state.records[appName] = record
                return task
            } catch {
                throw AppError(error, app: appName, state: record.lifecycle.state)
            }
        }
    }

    /// The background time the app has left (``AppLifecycle/backgroundTimeRemaining(now:)``); `nil`: no budget.
    func backgroundTimeRemaining(name: String, uid: UInt32) throws(AppError) -> Duration? {
        let appName = try Self.appName(name)
        let now = self.now()
        return try self.state.withLock { state throws(AppError) in
            let record = try self.appRecord(appName, uid: uid, in: state)
            let current = record.lifecycle.state
            guard current.isRunning, current != .suspended else {
                throw .wrongState(app: name, state: current, reason: "the app is \(current.rawValue): it runs no code to ask")
            }
            return record.lifecycle.backgroundTimeRemaining(now: now)
        }
    }

    func endBackgroundTask(name: String, uid: UInt32, id: Int) throws(AppError) {
        let appName = try Self.appName(name)
        try self.decide { state, log throws(AppError) in
            _ = try self.appRecord(appName, uid: uid, in: state)
            let now = self.now()
            try self.input(appName, in: &state, log: &log, refusedAs: AppError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.endBackgroundTask(id, now: now)
            }
        }
    }

    /// Keeps `data` in the store for the app's next launch; returns once it is on disk.
    func saveState(name: String, uid: UInt32, data: String?) async throws(AppError) {
        let appName = try Self.appName(name)
        _ = try self.state.withLock { state throws(AppError) in try self.appRecord(appName, uid: uid, in: state) }
        let limit = self.daemon.configuration.maxSavedState
        if let data, data.utf8.count > limit {
            throw .stateTooLarge(app: name, size: data.utf8.count, limit: limit)
        }
        do {
            try await self.store.saveState(of: appName, data)
        } catch {
            throw .storageFailed(reason: error.description)
        }
    }
}
