import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// Restart recovery: the states a restart of the daemon takes up, and the processes it waits for to attach again.
extension AppManager {
    /// Takes up the states recorded for apps whose processes outlived the daemon's last run (the same process: its
    /// pid and start time in this boot), and records the others as not running; returns the apps taken up. Until
    /// its process attaches again, such an app holds what is posted to it, and its callbacks wait for a stream.
    static func restoreStates(
        _ recorded: [AppName: Store.RecordedState],
        into state: inout State,
        store: Store,
        opener: ProcessOpener,
        logger: Logger
    ) -> [AppName] {
        var restoring: [AppName] = []
        for (appName, last) in recorded.sorted(by: { $0.key < $1.key }) {
            guard state.records[appName] != nil else { continue }
            // The pidfd is opened first and the process checked through it, so that the pid cannot pass to another
            // process between the check and its use.
            let alive = last.pid.flatMap(opener.open)
            guard let alive, let identity = last.process, alive.identity == identity,
                let taken = state.records[appName]!.lifecycle.restore(last.state, interrupted: last.interrupted)
            else {
                store.record(Store.RecordedState(state: .notRunning), of: appName)
                let entry = Self.transitionEntry(app: appName, from: last.state, to: .notRunning, reason: .processExited, pid: last.pid)
                logger.log(level: entry.level, "\(entry.message), while the daemon was not running", metadata: entry.metadata)
                continue
            }
            state.records[appName]!.restored = RestoredProcess(process: alive, identity: identity)
            // What interrupted it is not recorded: an operator's Interrupt ends it, as the lock's unlock or a wake does
            // not (they were not seen by this start).
            if last.interrupted { _ = state.records[appName]!.interruptions.begin(.requested) }
            Self.takeUpHold(appName, &state.records[appName]!, process: alive, logger: logger)
            state.counts[taken, default: 0] += 1
            if taken.isForeground { state.onScreen.insert(appName) }
            if taken != last.state {
                store.record(Store.RecordedState(state: taken, pid: alive.pid, process: identity), of: appName)
            }
            restoring.append(appName)
            logger.info(
                "\(appName): \(taken.rawValue) as before the restart, waiting for pid \(alive.pid) to attach again",
                metadata: ["app": "\(appName)", "state": "\(taken.rawValue)", "pid": "\(alive.pid)"]
            )
        }
        state.counts[.notRunning, default: 0] += state.records.count - restoring.count
        return restoring
    }

    /// Puts aside what each app of `unreadable` holds in the store, which this start could not read back: moved
    /// whole to the store's `setAside` table (kept for an operator), so that the app starts with nothing held and
    /// every other app is served. Each move is submitted before any other write of this start; it is logged once on
    /// disk, and one that fails leaves the rows where they were, to be tried again at the next start.
    func setAside(_ unreadable: [(app: String, reason: String, declarations: Bool)]) {
        for (app, reason, declarations) in unreadable {
            let metadata: Logger.Metadata = ["message_id": "\(MessageID.heldDataSetAside)", "app": "\(app)", "reason": "\(reason)"]
            self.store.setAside(app: app, reason: reason, at: self.wall(), declarations: declarations).whenFinished { result in
                switch result {
                case .success:
                    self.logger.error(
                        "What \(app) holds cannot be read (\(reason)): set aside in the store, and the app starts with nothing held",
                        metadata: metadata
                    )
                    // Read again off the writer's thread: the summary counts every row set aside, of every start.
                    Task { if let summaries = try? self.store.setAsideSummaries() { self.setAsideData.withLock { $0 = summaries } } }
                case .failure(let error):
                    self.logger.error("What \(app) holds cannot be read (\(reason)), and setting it aside failed: \(error)", metadata: metadata)
                }
            }
        }
    }

    /// An app taken up at start-up whose process has not attached again: it no longer counts as the app (its next
    /// attach launches it anew).
    func reattachTimedOut(_ appName: AppName, timeout: Duration) {
        // Whether the process still runs is read before the lock is taken, and counts for the process it was read of.
        guard let process = self.state.withLock({ $0.records[appName]?.restored?.process }) else { return }
        let alive = process.isAlive
        self.decide { state, log in
            guard let restored = state.records[appName]?.restored, restored.process === process else { return }
            state.records[appName]!.restored!.timeoutArmed = false
            let reason: TransitionReason = alive ? .notReattached : .processExited
            let now = self.now()
            self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now, reason: reason) }
            if reason == .notReattached {
                log.append(
                    LogEntry(
                        level: .notice,
                        message: "\(appName): pid \(restored.process.pid) did not attach again within \(timeout.seconds) s of the restart",
                        metadata: ["app": "\(appName)", "pid": "\(restored.process.pid)"]
                    )
                )
            }
        }
    }

    /// The daemon begins to stop. The apps are left as a crash leaves them: those whose processes run keep their
    /// states, recorded with their processes as each transition was, and the next start takes them up; their
    /// streams, closed by the daemon from now on, change nothing.
    func daemonStopping() {
        let running = self.decide { state, _ in
            state.stopping = true
            return state.records.values.count { $0.process != nil }
        }
        self.logger.notice(
            "Leaving \(running) running app\(running == 1 ? "" : "s") as \(running == 1 ? "it is" : "they are") for the next start",
            metadata: ["apps": "\(running)"]
        )
    }

    /// Records the app's state and the process running it, for a restart of the daemon to take up.
    func recordState(_ appName: AppName, _ record: Record, in state: inout State) {
        state.outbox.add(.recordState(appName, record.recordedState))
    }
}
