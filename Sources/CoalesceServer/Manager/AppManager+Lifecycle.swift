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

/// The lifecycle: each app's ``AppLifecycle`` fed one input at a time, its effects queued, its timer armed.
extension AppManager {
    /// Feeds one request to an app's lifecycle and carries out its effects; a refusal becomes the calling
    /// interface's error (`refusedAs`: WrongState, or NoSuchTask) and changes nothing.
    func input<Refusal: LifecycleRefusal>(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        refusedAs: Refusal.Type,
        _ body: (inout AppLifecycle<Instant>) throws(LifecycleError) -> [LifecycleEffect]
    ) throws(Refusal) {
        let before = state.records[appName]!.lifecycle.state
        try self.input(appName, in: &state, log: &log, launch: nil, body) { error throws(Refusal) in
            throw Refusal(error, app: appName, state: before)
        }
    }

    func input<Failure: Error>(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        launch: LaunchOptions?,
        _ body: (inout AppLifecycle<Instant>) throws(LifecycleError) -> [LifecycleEffect],
        onError: (LifecycleError) throws(Failure) -> Void
    ) throws(Failure) {
        var record = state.records[appName]!
        let wasReceiving = record.lifecycle.receivesAtOnce
        let before = (state: record.lifecycle.state, interrupted: record.lifecycle.interrupted)
        let effects: [LifecycleEffect]
        do {
            effects = try body(&record.lifecycle)
        } catch {
            try onError(error)
            return
        }
        // A process continued from its hold is continued before the callbacks that woke it are written.
        let effectsStart = state.outbox.end
        self.apply(effects, app: appName, record: &record, state: &state, log: &log, launch: launch)
        // After the callbacks the effects sent: a wake's events follow them.
        if !wasReceiving, record.lifecycle.receivesAtOnce { self.beganReceiving(appName, &record, woken: true, in: &state) }
        if !record.lifecycle.state.isRunning {
            record.forgetsTheLock()
            self.scenesEnded(appName, &record, in: &state, log: &log)
        }
        // An app without scenes is interrupted as a whole: once it is not, nothing interrupts it any more (it went to
        // the background, or stopped). An app's scenes keep their own interruption until its causes end.
        if !record.lifecycle.interrupted, record.scenes.scenes.isEmpty { record.interruptions.clear() }
        self.reschedule(appName, &record, now: self.now(), in: &state)
        if record.lifecycle.state != before.state || record.lifecycle.interrupted != before.interrupted {
            if !record.lifecycle.state.isRunning, let restored = record.restored {
                if restored.timeoutArmed { state.outbox.add(self.arming(.reattach(appName), after: nil)) }
                record.restored = nil
            }
            self.recordState(appName, record, in: &state)
        }
        self.settleSuspension(appName, &record, continuingAt: effectsStart, in: &state, log: &log)
        state.records[appName] = record
    }

    /// The wake: the app receives at once from now on where it did not, woken by its lifecycle (`woken`) or by a
    /// process attaching to it while it runs. The scene callbacks and what its inbox held go out, and a woken app is
    /// told the lock's net change while it ran no code: one callback, or none when the screen was locked and unlocked meanwhile.
    func beganReceiving(_ appName: AppName, _ record: inout Record, woken: Bool, in state: inout State) {
        self.sendHeldSceneCallbacks(&record, in: &state.outbox)
        let woke = self.inboxInput(&record, of: appName, charging: state.ledger, outbox: &state.outbox) { inbox, reception, next in
            inbox.woke(reception, next: &next)
        }
        state.inboxActions.append((appName, woke))
        if woken, record.tell(protectedDataAvailable: state.screenLock.available) {
            state.screenLock.news.append((appName, state.screenLock.available))
        }
    }

    /// Requests that cannot be refused (acknowledgements, the clock).
    func input(
        _ appName: AppName,
        in state: inout State,
        log: inout [LogEntry],
        _ body: (inout AppLifecycle<Instant>) -> [LifecycleEffect]
    ) {
        self.input(appName, in: &state, log: &log, launch: nil, body) { _ in }  // body cannot fail
    }

    func apply(
        _ effects: [LifecycleEffect],
        app: AppName,
        record: inout Record,
        state: inout State,
        log: inout [LogEntry],
        launch: LaunchOptions?
    ) {
        var current = effects.first.flatMap { effect -> AppState? in
            if case .transition(let from, _, _) = effect { return from }
            return nil
        } ?? record.lifecycle.state
        var lastDelivered: UInt64 = 0
        for effect in effects {
            switch effect {
            case .deliver(let callback, let sequence, let task):
                lastDelivered = sequence
                if let (stream, reply) = record.callback(callback, sequence: sequence, task: task, in: current, launch: launch) {
                    state.outbox.add(.send(stream, [reply]))
                }
                if callback == .backgroundTaskWillExpire {
                    log.append(
                        LogEntry(
                            level: .notice,
                            message: task.map { "\(app): background task \($0) is about to expire" }
                                ?? "\(app): the background time of its wake for events is about to run out",
                            metadata: [
                                "app": "\(app)", "task": "\(task ?? 0)", "message_id": "\(MessageID.taskExpiring)",
                            ]
                        )
                    )
                }
            case .transition(let from, let to, let reason):
                current = to
                if to.isForeground { state.onScreen.insert(app) } else { state.onScreen.remove(app) }
                state.counts[from, default: 0] -= 1
                state.counts[to, default: 0] += 1
                record.since = self.wall()
                record.reason = reason
                state.transitions += 1
                log.append(
                    Self.transitionEntry(
                        app: app, from: from, to: to, reason: reason, pid: record.attachment?.pid,
                        timings: record.lifecycle.timings
                    )
                )
                self.tellMonitors(app: app, from: from, to: to, reason: reason, time: record.since, state: &state)
            case .kill:
                // The transition that follows is the journal entry, with the pid.
                if let process = record.process?.handle {
                    state.kills.append(process)
                    state.outbox.add(.signal(process, .kill))
                }
                if let attachment = record.detach() { self.endStream(attachment, in: &state) }
            case .launchesHeld(let failed):
                log.append(
                    LogEntry(
                        level: .warning,
                        message: "\(app): its last \(failed) launches ended before it finished launching; it is no longer "
                            + "launched by the daemon until an operator launches it (coalescectl launch \(app))",
                        metadata: ["app": "\(app)", "failed": "\(failed)", "message_id": "\(MessageID.launchesHeld)"]
                    )
                )
            case .terminate:
                let process = record.process?.handle
                if let attachment = record.detach() { self.endStream(attachment, in: &state) }
                // An app waiting to attach again after a restart of the daemon hears nothing: it gets SIGTERM after
                // the grace, as an app that does not acknowledge willTerminate does.
                if let process {
                    let termination = Termination(
                        app: app,
                        process: process,
                        sequence: lastDelivered,
                        grace: self.daemon.configuration.terminateGrace,
                        eventLoop: self.eventLoop,
                        logger: self.logger
                    )
                    record.termination = termination
                    state.outbox.add(.startTermination(termination))
                }
            }
        }
    }

    /// The journal entry for one transition; its MESSAGE_ID says what kind of event it was. A deadline missed is
    /// named with its setting and value (`timings`), so that the line says what to change.
    static func transitionEntry(
        app: AppName,
        from: AppState,
        to: AppState,
        reason: TransitionReason,
        pid: Int32?,
        timings: LifecycleTimings = LifecycleTimings()
    ) -> LogEntry {
        let level: Logger.Level
        let messageID: String
        let what: String
        switch reason {
        case .launchNotAcknowledged, .backgroundNotAcknowledged:
            level = .warning
            messageID = MessageID.deadlineMissed
            what = reason == .launchNotAcknowledged
                ? "killed: didFinishLaunching was not acknowledged within AcknowledgeTimeoutSec=\(timings.launchAcknowledgement.settingText)"
                : "killed: didEnterBackground was not acknowledged within AcknowledgeTimeoutSec=\(timings.backgroundAcknowledgement.settingText)"
        case .backgroundTasksExpired:
            level = .notice
            messageID = MessageID.tasksExpired
            what = "background tasks expired, \(to == .notRunning ? "terminated" : "tasks ended")"
        case .purge:
            level = .notice
            messageID = MessageID.purged
            what = "purged to reclaim memory"
        default:
            level = .info
            messageID = MessageID.transition
            what = "\(from.rawValue) → \(to.rawValue) (\(reason.rawValue))"
        }
        var metadata: Logger.Metadata = [
            "app": "\(app)", "from": "\(from.rawValue)", "to": "\(to.rawValue)", "reason": "\(reason.rawValue)",
            "message_id": "\(messageID)",
        ]
        if let pid { metadata["pid"] = "\(pid)" }
        return LogEntry(level: level, message: "\(app): \(what)", metadata: metadata)
    }

    /// Another app takes the foreground: every app on screen but `appName` goes to the background, except those
    /// on screen through their windows, which the screen moves (their scenes say where they are).
    func clearForeground(except appName: AppName, now: Instant, in state: inout State, log: inout [LogEntry]) {
        guard self.daemon.configuration.exclusiveForeground else { return }
        for other in state.onScreen where other != appName && state.records[other]?.scenes.scenes.isEmpty != false {
            try? self.input(other, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.deactivate(now: now)
            }
        }
    }

    /// Arms the app's timer for its next deadline, when that changed.
    func reschedule(_ appName: AppName, _ record: inout Record, now: Instant, in state: inout State) {
        guard record.followsNextDeadline() else { return }
        state.outbox.add(self.arming(.deadline(appName), after: record.deadline.map { max(.zero, now.duration(to: $0)) }))
    }

    func deadlineReached(_ appName: AppName) {
        self.decide { state, log in
            // The timer fired: whatever the deadline is now, it is armed again.
            guard state.update(appName, { $0.deadline = nil }) != nil else { return }
            let now = self.now()
            self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.timePassed(now: now) }
        }
    }
}
