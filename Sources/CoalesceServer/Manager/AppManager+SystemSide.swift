import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

/// Launch and process control: what the operator asks of apps (io.coalesced.System), launches through systemd.
extension AppManager {
    // MARK: The system side

    /// Starts an app and returns once its process has attached and been launched. `reason` is what its launch
    /// options say: `.user` for an operator's Launch, which also lets go of launches held after failures; any other
    /// is a launch the daemon makes by itself, refused (WrongState) while they are held.
    func launch(name: String, destination: LaunchDestination, reason: LaunchReason = .user) async throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        let timeout = self.daemon.configuration.launchTimeout
        let unit = try self.decide { state, log throws(SystemError) -> String? in
            guard var record = state.records[appName] else { throw .noSuchApp(app: name) }
            guard record.lifecycle.state == .notRunning else {
                throw .wrongState(
                    app: name,
                    state: record.lifecycle.state,
                    reason: LifecycleError.alreadyRunning(record.lifecycle.state).description
                )
            }
            if reason == .user {
                if record.lifecycle.launchesHeld {
                    log.append(
                        LogEntry(
                            level: .notice,
                            message: "\(appName): no longer held back: an operator launched it",
                            metadata: ["app": "\(appName)"]
                        )
                    )
                }
                record.lifecycle.launchesAllowed()
            } else if record.lifecycle.launchesHeld {
                // The daemon's own launch (for an event, an answer, a URL): its caller logs this.
                throw .wrongState(
                    app: name, state: .notRunning,
                    reason: "its last \(record.lifecycle.failedLaunches.inARow) launches failed; an operator's Launch lets it be launched again"
                )
            }
            if record.pendingLaunch == nil {
                record.pendingLaunch = PendingLaunch(destination: destination, reason: reason)
                // LaunchTimeoutSec=infinity: the launch waits for the app as long as it takes.
                if let timeout { state.outbox.add(self.arming(.launch(appName), after: timeout)) }
            } else {
                // A second Launch while one waits joins it; the later destination and reason win.
                record.pendingLaunch!.destination = destination
                record.pendingLaunch!.reason = reason
            }
            state.records[appName] = record
            return record.registration.launchUnit
        }
        if let unit {
            do {
                try await self.startUnit(unit)
            } catch {
                self.failLaunch(appName, .launchFailed(app: name, unit: unit, reason: "\(error)"))
                throw .launchFailed(app: name, unit: unit, reason: "\(error)")
            }
        }
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let running = self.state.withLock { state -> Bool? in
                    guard state.records[appName]?.pendingLaunch == nil else {
                        state.records[appName]!.pendingLaunch!.waiters.append(continuation)
                        return nil
                    }
                    return state.records[appName]?.lifecycle.state.isRunning == true
                }
                switch running {
                case nil: break  // answered when it attaches, or its launch fails
                case true?: continuation.resume()  // it attached before this call started waiting
                case false?: continuation.resume(throwing: Self.launchEnded(name, timeout: timeout))
                }
            }
        } catch let error as SystemError {
            throw error
        } catch {
            throw Self.launchEnded(name, timeout: timeout)
        }
        return try self.get(name)
    }

    /// What a Launch answers when its app is not running once it comes to wait for it: the launch timed out, or,
    /// with no timeout (`LaunchTimeoutSec=infinity`), the app's process attached and exited before then.
    private static func launchEnded(_ name: String, timeout: Duration?) -> SystemError {
        guard let timeout else {
            return .wrongState(app: name, state: .notRunning, reason: "the app's process attached and exited before its launch was answered")
        }
        return .launchTimedOut(app: name, timeout: timeout)
    }

    /// Brings a running app to the foreground.
    func activate(name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        return try self.decide { state, log throws(SystemError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            let now = self.now()
            if record.lifecycle.state.isRunning, record.lifecycle.state != .active {
                self.clearForeground(except: appName, now: now, in: &state, log: &log)
            }
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.activate(now: now)
            }
            return state.records[appName]!.snapshot
        }
    }

    /// Sends an app (by default the foreground one) to the background.
    func deactivate(name: String?) throws(SystemError) -> Snapshot {
        try self.decide { state, log throws(SystemError) in
            let appName = try self.target(name, in: state) { $0.lifecycle.state.isForeground }
            let now = self.now()
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.deactivate(now: now)
            }
            return state.records[appName]!.snapshot
        }
    }

    /// An operator's interruption (or, with `cause` `.alert`, an alert's) begins or ends for an app (by default the
    /// foreground one, or the one it interrupted). It ends only its own: an app the lock, a sleep or an alert
    /// interrupts too stays inactive until they end.
    func interrupt(name: String?, begins: Bool, cause: InterruptionCause = .requested) throws(SystemError) -> Snapshot {
        try self.decide { state, log throws(SystemError) in
            let appName = try self.target(name, in: state) { record in
                begins ? record.lifecycle.state == .active : record.interruptions.causes.contains(cause)
            }
            let record = state.records[appName]!
            if begins {
                // Refused as the lifecycle refuses it: an app that is not active, or already interrupted.
                var trial = record.lifecycle
                do throws(LifecycleError) {
                    _ = try trial.interruptionBegan(now: self.now())
                } catch {
                    throw SystemError(error, app: appName, state: record.lifecycle.state)
                }
            } else if !record.interruptions.causes.contains(cause) {
                throw SystemError(.notInterrupted, app: appName, state: record.lifecycle.state)
            }
            self.interruption(cause, begins: begins, of: appName, in: &state, log: &log)
            return state.records[appName]!.snapshot
        }
    }

    func terminate(name: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        return try self.decide { state, log throws(SystemError) in
            guard state.records[appName] != nil else { throw .noSuchApp(app: name) }
            let now = self.now()
            try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                try lifecycle.terminate(now: now)
            }
            return state.records[appName]!.snapshot
        }
    }

    /// Purges the named suspended app, or the `count` suspended apps with the most resident memory.
    func purge(name: String?, count: Int) throws(SystemError) -> [AppName] {
        var largest: [AppName]?
        if name == nil {
            // In the order memory pressure purges them too: the largest resident set first.
            largest = self.purgeCandidates().map(\.app)
            guard !largest!.isEmpty else { throw .nothingToPurge }
        }
        return try self.decide { state, log throws(SystemError) in
            let chosen: [AppName]
            if let name {
                let appName = try Self.systemAppName(name)
                guard state.records[appName] != nil else { throw .noSuchApp(app: name) }
                chosen = [appName]
            } else {
                // Still suspended now that the lock is held again.
                chosen = Array((largest ?? []).filter { state.records[$0]?.lifecycle.state == .suspended }.prefix(count))
                guard !chosen.isEmpty else { throw .nothingToPurge }
            }
            let now = self.now()
            for appName in chosen {
                try self.input(appName, in: &state, log: &log, refusedAs: SystemError.self) { lifecycle throws(LifecycleError) in
                    try lifecycle.purge(now: now)
                }
            }
            return chosen
        }
    }

    func launchTimedOut(_ appName: AppName, timeout: Duration) {
        self.failLaunch(appName, .launchTimedOut(app: appName.value, timeout: timeout))
        self.logger.warning(
            "\(appName): did not attach within \(timeout.seconds) s of Launch",
            metadata: ["app": "\(appName)", "message_id": "\(MessageID.launchTimedOut)"]
        )
    }

    /// A launch never reached the app: its unit did not start, or no process attached in time. For an app with a
    /// launch unit that is a launch that failed (crash-loop protection); one without waits for its user to start it.
    func failLaunch(_ appName: AppName, _ error: SystemError) {
        self.decide { state, log in
            guard let pending = state.records[appName]?.pendingLaunch else { return }
            state.outbox.add(self.arming(.launch(appName), after: nil))
            state.records[appName]!.pendingLaunch = nil
            state.outbox.add(.answerLaunch(pending.waiters, error))
            if state.records[appName]!.registration.launchUnit != nil {
                self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.launchFailed() }
            }
        }
    }
}
