import CoalesceCore
import Logging
import NIOCore
import Systemd

#if canImport(Glibc)
import Glibc
#endif

/// What a registration does to the app's suspension mode.
enum SuspensionChange: Sendable {
    /// Left out: as before.
    case keep
    /// A mode, or `nil` for the configuration's.
    case set(SuspensionMode?)
}

/// One app's process held while it is suspended, and the calls to systemd about its unit.
struct SuspensionRecord {
    /// A process stopped (SIGSTOP) or frozen (its unit, through systemd).
    struct Held {
        var process: any AppProcess
        var how: ProcessHold
        /// The unit frozen, for ``ProcessHold/frozen``.
        var unit: String?
    }

    /// The highest number the app acknowledged: it is held only once it has acknowledged all it was sent.
    var acknowledged: UInt64 = 0
    /// The delay after which the app is held, while it runs.
    var delay: Scheduled<Void>?
    /// Its process as held now (for a unit: asked to be frozen, or frozen).
    var held: Held?
    /// The unit systemd froze for the app and has not thawed yet, by the last call it answered.
    var frozenUnit: String?
    /// A FreezeUnit or ThawUnit call for the app is with systemd: the next waits for its answer.
    var unitCallPending = false
    /// ThawUnit calls that failed in a row (the first is logged; each is asked again a second later).
    var thawRetries = 0
}

/// Real suspension (DESIGN.md §5): a suspended app's process is stopped with SIGSTOP or its launch unit frozen with
/// systemd's cgroup freezer, a short delay after it is suspended and never while a callback or event it was sent is
/// unacknowledged; it is continued (thawed) when it leaves the suspended state, before anything is sent to it.
///
/// ``settleSuspension(_:_:in:log:)`` is the one place this is decided: ``input(_:in:log:launch:_:onError:)`` calls
/// it after every input to the app's lifecycle (a wake, a purge, an acknowledgement), and ``attach(name:peer:process:responder:)``
/// after a process attaches. Everything an app is sent while suspended follows a transition out of that state (a
/// suspended app receives nothing: the inbox holds its events), and that transition's input continues it before its
/// callbacks are written; a process killed (a purge, a terminate of a suspended app) is killed as it is, SIGKILL
/// working on stopped and frozen tasks alike.
extension AppManager {
    /// The mode the app is suspended by: its own, or the configuration's.
    func suspensionMode(of record: Record) -> SuspensionMode {
        record.registration.suspension ?? self.daemon.configuration.suspension
    }

    /// Whether the app's process is to be held now (``SuspensionRule``).
    private func holds(_ record: Record) -> Bool {
        // Most inputs (an Ack of a running app's event) end here, without reading the configuration under its lock.
        guard record.lifecycle.state == .suspended else { return false }
        return SuspensionRule.holds(
            state: record.lifecycle.state,
            mode: self.suspensionMode(of: record),
            attached: record.attachment?.process != nil,
            // Before its first Ack of this run, the app has acknowledged nothing this run sent.
            acknowledged: max(record.suspension.acknowledged, self.firstSequence - 1),
            lastSent: record.lifecycle.nextSequence - 1
        )
    }

    /// Holds, continues or leaves the app's process as its state now asks, under the lock.
    /// - Parameter killed: processes about to be sent SIGKILL (``State/kills``), which are not continued first.
    func settleSuspension(_ appName: AppName, _ record: inout Record, killed: [any AppProcess], log: inout [LogEntry]) {
        let current = record.process?.handle
        if let held = record.suspension.held, record.lifecycle.state != .suspended || held.process !== current {
            record.suspension.held = nil
            let killing = killed.contains { $0 === held.process }
            if !killing, held.process.isAlive {
                self.release(held, of: appName, &record, log: &log)
            } else if held.how == .frozen {
                // Killed frozen (SIGKILL works on frozen tasks), before its unit is thawed: it runs no more code.
                if killing { held.process.signal(SIGKILL) }
                self.driveUnit(appName, &record)
            }
        }
        let holds = self.holds(record)
        if holds, record.suspension.held == nil, record.suspension.delay == nil {
            let delay = self.daemon.configuration.suspensionDelay
            record.suspension.delay = self.eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                self.suspensionDelayEnded(appName)
            }
        } else if !holds, let delay = record.suspension.delay {
            delay.cancel()
            record.suspension.delay = nil
        }
    }

    /// ``settleSuspension(_:_:killed:log:)`` for an app where it lies in the state.
    func settleSuspension(_ appName: AppName, in state: inout State, log: inout [LogEntry]) {
        let killed = state.kills
        state.update(appName) { record in self.settleSuspension(appName, &record, killed: killed, log: &log) }
    }

    /// Continues a stopped process (at once: the callbacks written next reach a running process), or asks systemd
    /// to thaw a frozen unit (what is written meanwhile waits in the app's socket until it runs).
    private func release(_ held: SuspensionRecord.Held, of appName: AppName, _ record: inout Record, log: inout [LogEntry]) {
        switch held.how {
        case .stopped:
            held.process.signal(SIGCONT)
            log.append(Self.suspensionEntry(appName, "continued (SIGCONT)", "continued", pid: held.process.pid))
        case .frozen:
            self.driveUnit(appName, &record)
        }
        // A process taken up after a restart of the daemon could not attach again while it was held: its time to
        // attach again starts now.
        if record.attachment == nil, record.restored != nil, record.restored?.timeout == nil,
            let timeout = self.daemon.configuration.launchTimeout
        {
            record.restored?.timeout = self.eventLoop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) {
                self.reattachTimedOut(appName, timeout: timeout)
            }
        }
    }

    /// The delay after the app was suspended has passed: its process is stopped or its unit frozen, if the app is
    /// still as it was.
    func suspensionDelayEnded(_ appName: AppName) {
        self.locked { state, log in
            let killed = state.kills
            state.update(appName) { record in
                record.suspension.delay = nil
                guard record.suspension.held == nil, self.holds(record), let process = record.attachment?.process
                else {
                    self.settleSuspension(appName, &record, killed: killed, log: &log)
                    return
                }
                if record.suspension.unitCallPending {
                    // A thaw of its unit is still with systemd: try again once more time has passed.
                    self.settleSuspension(appName, &record, killed: killed, log: &log)
                    return
                }
                if self.suspensionMode(of: record) == .freeze, let unit = record.registration.launchUnit {
                    if process.runs(in: unit) {
                        record.suspension.held = .init(process: process, how: .frozen, unit: unit)
                        self.driveUnit(appName, &record)
                        return
                    }
                    log.append(
                        Self.suspensionEntry(
                            appName, "pid \(process.pid) does not run in its launch unit \(unit); stopping it instead of freezing",
                            "stopped", pid: process.pid, level: .notice, unit: unit
                        )
                    )
                }
                self.stop(process, of: appName, &record, log: &log)
            }
        }
    }

    private func stop(_ process: any AppProcess, of appName: AppName, _ record: inout Record, log: inout [LogEntry]) {
        guard process.signal(SIGSTOP) else { return }  // gone: its stream's end says so
        record.suspension.held = .init(process: process, how: .stopped)
        log.append(Self.suspensionEntry(appName, "stopped (SIGSTOP) while suspended", "stopped", pid: process.pid))
    }

    /// Brings the app's unit to what its hold asks (frozen while held frozen, thawed otherwise), one call to systemd
    /// at a time: the next is made when the last is answered.
    private func driveUnit(_ appName: AppName, _ record: inout Record) {
        guard !record.suspension.unitCallPending else { return }
        let wanted = record.suspension.held.flatMap { $0.how == .frozen ? $0.unit : nil }
        let control = self.unitControl
        if let unit = wanted, record.suspension.frozenUnit == nil {
            record.suspension.unitCallPending = true
            Task {
                let result: Result<(String?, Duration), any Error>
                do {
                    if let refusal = try await control.refusal(unit) {
                        result = .success((refusal, .zero))
                    } else {
                        let start = ContinuousClock.now
                        try await control.freeze(unit)
                        result = .success((nil, ContinuousClock.now - start))
                    }
                } catch {
                    result = .failure(error)
                }
                self.unitAnswered(appName, unit: unit, freezing: true, result)
            }
        } else if wanted == nil, let unit = record.suspension.frozenUnit {
            record.suspension.unitCallPending = true
            Task {
                let result: Result<(String?, Duration), any Error>
                do {
                    let start = ContinuousClock.now
                    try await control.thaw(unit)
                    result = .success((nil, ContinuousClock.now - start))
                } catch {
                    result = .failure(error)
                }
                self.unitAnswered(appName, unit: unit, freezing: false, result)
            }
        }
    }

    /// systemd answered a FreezeUnit (`freezing`) or a ThawUnit: `.success((nil, time))` done in that time (the
    /// call's round trip, which systemd answers once the kernel has frozen or thawed the cgroup), `.success((reason,
    /// _))` a freeze refused before it was asked (the watchdog), `.failure` the call failed.
    private func unitAnswered(_ appName: AppName, unit: String, freezing: Bool, _ result: Result<(String?, Duration), any Error>) {
        self.locked { state, log in
            let killed = state.kills
            state.update(appName) { record in
                record.suspension.unitCallPending = false
                let pid = record.suspension.held?.process.pid ?? record.process?.pid
                switch (freezing, result) {
                case (true, .success((nil, let time))):
                    record.suspension.frozenUnit = unit
                    var entry = Self.suspensionEntry(
                        appName, "frozen (FreezeUnit \(unit), \(Self.milliseconds(time)) ms) while suspended", "frozen", pid: pid, unit: unit
                    )
                    entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                    log.append(entry)
                case (false, .success((_, let time))):
                    record.suspension.frozenUnit = nil
                    var entry = Self.suspensionEntry(appName, "thawed (ThawUnit \(unit), \(Self.milliseconds(time)) ms)", "thawed", pid: pid, unit: unit)
                    entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                    log.append(entry)
                case (true, .success((let refusal?, _))):
                    self.freezeFailed(appName, &record, unit: unit, reason: refusal, log: &log)
                case (true, .failure(let error)):
                    self.freezeFailed(appName, &record, unit: unit, reason: "FreezeUnit failed: \(error)", log: &log)
                case (false, .failure(let error)):
                    // Thawed meanwhile by someone else: nothing is left to do.
                    if let process = record.process?.handle, process.isAlive, !process.isFrozen {
                        record.suspension.frozenUnit = nil
                        record.suspension.thawRetries = 0
                        break
                    }
                    // Still frozen (the bus lost for a moment, systemd busy): asked again every second, said once.
                    if record.suspension.thawRetries == 0 {
                        log.append(
                            Self.suspensionEntry(
                                appName, "cannot thaw \(unit): \(error); asking again every second (`systemctl thaw \(unit)` continues it)",
                                "thawFailed", pid: pid, level: .error, unit: unit
                            )
                        )
                    }
                    record.suspension.thawRetries += 1
                    self.eventLoop.scheduleTask(in: .seconds(1)) { self.retryUnit(appName) }
                    return
                }
                if !freezing, case .success = result { record.suspension.thawRetries = 0 }
                // What the app's state asks now may differ from what the call did (woken while it was frozen).
                self.driveUnit(appName, &record)
                self.settleSuspension(appName, &record, killed: killed, log: &log)
            }
        }
    }

    /// Asks systemd again for what the app's state wants of its unit, after a call that failed.
    private func retryUnit(_ appName: AppName) {
        self.locked { state, _ in
            state.update(appName) { record in self.driveUnit(appName, &record) }
        }
    }

    /// A unit that could not be frozen: the app's process is stopped instead, if it is still to be held.
    private func freezeFailed(_ appName: AppName, _ record: inout Record, unit: String, reason: String, log: inout [LogEntry]) {
        guard let held = record.suspension.held, held.how == .frozen else { return }
        record.suspension.held = nil
        log.append(
            Self.suspensionEntry(
                appName, "not frozen: \(reason); stopping pid \(held.process.pid) with SIGSTOP instead", "stopped",
                pid: held.process.pid, level: .notice, unit: unit
            )
        )
        self.stop(held.process, of: appName, &record, log: &log)
    }

    /// Takes up, at start-up, a process of an app taken up suspended that an earlier run stopped or froze: it stays
    /// so until the app is woken; one that is held while its app is not suspended is continued.
    static func takeUpHold(_ appName: AppName, _ record: inout Record, process: any AppProcess, logger: Logger) {
        let frozenUnit = record.registration.launchUnit.flatMap { process.runs(in: $0) && process.isFrozen ? $0 : nil }
        let how: ProcessHold? = frozenUnit != nil ? .frozen : process.isStopped ? .stopped : nil
        guard let how else { return }
        record.suspension.frozenUnit = frozenUnit
        if record.lifecycle.state == .suspended {
            record.suspension.held = .init(process: process, how: how, unit: frozenUnit)
            logger.info(
                "\(appName): pid \(process.pid) is \(how.rawValue) as the daemon's last run left it; held until the app is woken",
                metadata: ["app": "\(appName)", "pid": "\(process.pid)", "suspension": "\(how.rawValue)"]
            )
        } else if how == .stopped {
            process.signal(SIGCONT)
            record.suspension.frozenUnit = nil
            let entry = Self.suspensionEntry(appName, "continued (SIGCONT): it is \(record.lifecycle.state.rawValue)", "continued", pid: process.pid)
            logger.log(level: entry.level, "\(entry.message)", metadata: entry.metadata)
        }
        // A frozen unit of an app that is not suspended is thawed once the manager runs (``thawLeftOver()``).
    }

    /// Thaws, once the manager runs, the units an earlier run left frozen whose apps are not suspended.
    func thawLeftOver() {
        self.locked { state, _ in
            for appName in state.records.keys where state.records[appName]!.suspension.frozenUnit != nil {
                state.update(appName) { record in
                    if record.suspension.held == nil { self.driveUnit(appName, &record) }
                }
            }
        }
    }

    /// A call's time in milliseconds, to a tenth.
    static func milliseconds(_ time: Duration) -> String {
        let tenths = (time.components.seconds * 10_000 + time.components.attoseconds / 100_000_000_000_000)
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func suspensionEntry(
        _ app: AppName,
        _ what: String,
        _ suspension: String,
        pid: Int32?,
        level: Logger.Level = .info,
        unit: String? = nil
    ) -> LogEntry {
        var metadata: Logger.Metadata = ["app": "\(app)", "suspension": "\(suspension)"]
        if let pid { metadata["pid"] = "\(pid)" }
        if let unit { metadata["unit"] = "\(unit)" }
        return LogEntry(level: level, message: "\(app): \(what)", metadata: metadata)
    }
}
