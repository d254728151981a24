import CoalesceCore
import Logging
import Synchronization
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
    /// The delay after which the app is held runs (``AppTimer/suspensionDelay(_:)``).
    var delayArmed = false
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
/// ``settleSuspension(_:_:continuingAt:in:log:)`` is the one place this is decided: ``input(_:in:log:launch:_:onError:)`` calls
/// it after every input to the app's lifecycle (a wake, a purge, an acknowledgement), and ``attach(name:peer:process:responder:)``
/// after a process attaches. Everything an app is sent while suspended follows a transition out of that state (a
/// suspended app receives nothing: the inbox holds its events), and that transition's input continues it before its
/// callbacks are written (its SIGCONT goes before them in the outbox); a process killed (a purge, a terminate of a
/// suspended app) is killed as it is, SIGKILL working on stopped and frozen tasks alike.
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
    /// - Parameter continuingAt: where in the outbox a continue goes: before the callbacks of the input that woke it.
    func settleSuspension(
        _ appName: AppName,
        _ record: inout Record,
        continuingAt: Int? = nil,
        in state: inout State,
        log: inout [LogEntry]
    ) {
        let current = record.process?.handle
        if let held = record.suspension.held, record.lifecycle.state != .suspended || held.process !== current {
            record.suspension.held = nil
            let killing = state.kills.contains { $0 === held.process }
            if !killing {
                self.release(held, of: appName, &record, continuingAt: continuingAt, in: &state)
            } else if held.how == .frozen {
                // Killed frozen (SIGKILL works on frozen tasks), before its unit is thawed: it runs no more code.
                self.driveUnit(appName, &record, in: &state)
            }
        }
        let holds = self.holds(record)
        if holds, record.suspension.held == nil, !record.suspension.delayArmed {
            record.suspension.delayArmed = true
            state.outbox.add(.arm(.suspensionDelay(appName), after: self.daemon.configuration.suspensionDelay))
        } else if !holds, record.suspension.delayArmed {
            record.suspension.delayArmed = false
            state.outbox.add(.arm(.suspensionDelay(appName), after: nil))
        }
    }

    /// ``settleSuspension(_:_:continuingAt:in:log:)`` for an app where it lies in the state.
    func settleSuspension(_ appName: AppName, in state: inout State, log: inout [LogEntry]) {
        guard var record = state.records[appName] else { return }
        self.settleSuspension(appName, &record, in: &state, log: &log)
        state.records[appName] = record
    }

    /// Continues a stopped process (before the callbacks that follow reach it, so that they reach a running process),
    /// or asks systemd to thaw a frozen unit (what is written meanwhile waits in the app's socket until it runs).
    private func release(
        _ held: SuspensionRecord.Held,
        of appName: AppName,
        _ record: inout Record,
        continuingAt position: Int?,
        in state: inout State
    ) {
        switch held.how {
        case .stopped:
            let entry = Self.suspensionEntry(appName, "continued (SIGCONT)", "continued", pid: held.process.pid)
            if let position {
                state.outbox.insert(.continueProcess(held.process, entry), at: position)
            } else {
                state.outbox.add(.continueProcess(held.process, entry))
            }
        case .frozen:
            self.driveUnit(appName, &record, in: &state)
        }
        // A process taken up after a restart of the daemon could not attach again while it was held: its time to
        // attach again starts now.
        if record.attachment == nil, record.restored != nil, record.restored?.timeoutArmed == false,
            let timeout = self.daemon.configuration.launchTimeout
        {
            record.restored?.timeoutArmed = true
            state.outbox.add(.arm(.reattach(appName), after: timeout))
        }
    }

    /// The delay after the app was suspended has passed: its process is stopped or its unit frozen, if the app is
    /// still as it was.
    func suspensionDelayEnded(_ appName: AppName) {
        // Whether the process runs in its launch unit is read from /proc before the lock is taken, and counts for the
        // process and unit it was read of.
        let candidate = self.state.withLock { state -> (process: any AppProcess, unit: String)? in
            guard let record = state.records[appName], let process = record.attachment?.process,
                self.suspensionMode(of: record) == .freeze, let unit = record.registration.launchUnit
            else { return nil }
            return (process, unit)
        }
        let runsInUnit = candidate.map { $0.process.runs(in: $0.unit) } ?? false
        self.decide { state, log in
            guard var record = state.records[appName] else { return }
            defer { state.records[appName] = record }
            record.suspension.delayArmed = false
            guard record.suspension.held == nil, self.holds(record), let process = record.attachment?.process,
                // A thaw of its unit still with systemd: tried again once more time has passed.
                !record.suspension.unitCallPending
            else {
                self.settleSuspension(appName, &record, in: &state, log: &log)
                return
            }
            if self.suspensionMode(of: record) == .freeze, let unit = record.registration.launchUnit {
                if let candidate, candidate.process === process, candidate.unit == unit, runsInUnit {
                    record.suspension.held = .init(process: process, how: .frozen, unit: unit)
                    self.driveUnit(appName, &record, in: &state)
                    return
                }
                log.append(
                    Self.suspensionEntry(
                        appName, "pid \(process.pid) does not run in its launch unit \(unit); stopping it instead of freezing",
                        "stopped", pid: process.pid, level: .notice, unit: unit
                    )
                )
            }
            self.stop(process, of: appName, &record, in: &state)
        }
    }

    /// Holds the process stopped; one gone meanwhile is let go when its stream's end is seen.
    private func stop(_ process: any AppProcess, of appName: AppName, _ record: inout Record, in state: inout State) {
        record.suspension.held = .init(process: process, how: .stopped)
        state.outbox.add(.stopProcess(process, Self.suspensionEntry(appName, "stopped (SIGSTOP) while suspended", "stopped", pid: process.pid)))
    }

    /// Brings the app's unit to what its hold asks (frozen while held frozen, thawed otherwise), one call to systemd
    /// at a time: the next is made when the last is answered.
    private func driveUnit(_ appName: AppName, _ record: inout Record, in state: inout State) {
        guard !record.suspension.unitCallPending else { return }
        let wanted = record.suspension.held.flatMap { $0.how == .frozen ? $0.unit : nil }
        if let unit = wanted, record.suspension.frozenUnit == nil {
            record.suspension.unitCallPending = true
            state.outbox.add(.unitCall(appName, .freeze(unit: unit)))
        } else if wanted == nil, let unit = record.suspension.frozenUnit {
            record.suspension.unitCallPending = true
            state.outbox.add(.unitCall(appName, .thaw(unit: unit, process: record.process?.handle)))
        }
    }

    /// Makes a unit call, off the caller's thread; its answer is decided by ``unitAnswered(_:call:_:)``.
    func call(_ call: UnitCall, for appName: AppName) {
        let control = self.unitControl
        Task {
            let start = ContinuousClock.now
            let answer: UnitAnswer
            do {
                switch call {
                case .freeze(let unit):
                    if let refusal = try await control.refusal(unit) {
                        answer = .refused(refusal)
                    } else {
                        try await control.freeze(unit)
                        answer = .done(ContinuousClock.now - start)
                    }
                case .thaw(let unit, _):
                    try await control.thaw(unit)
                    answer = .done(ContinuousClock.now - start)
                }
            } catch {
                // A failed thaw of a unit whose process runs again was thawed by someone else meanwhile.
                if case .thaw(_, let process?) = call, process.isAlive, !process.isFrozen {
                    answer = .thawedMeanwhile
                } else {
                    answer = .failed(error)
                }
            }
            self.unitAnswered(appName, call: call, answer)
        }
    }

    /// How systemd answered a unit call.
    enum UnitAnswer {
        /// Done in that time: the call's round trip, which systemd answers once the kernel has frozen or thawed the
        /// cgroup.
        case done(Duration)
        /// A freeze refused before it was asked (the watchdog).
        case refused(String)
        /// A thaw failed, but the process runs: someone else thawed the unit.
        case thawedMeanwhile
        case failed(any Error)
    }

    private func unitAnswered(_ appName: AppName, call: UnitCall, _ answer: UnitAnswer) {
        self.decide { state, log in
            guard var record = state.records[appName] else { return }
            defer { state.records[appName] = record }
            record.suspension.unitCallPending = false
            let unit = call.unit
            let pid = record.suspension.held?.process.pid ?? record.process?.pid
            switch (call, answer) {
            case (.freeze, .done(let time)):
                record.suspension.frozenUnit = unit
                var entry = Self.suspensionEntry(
                    appName, "frozen (FreezeUnit \(unit), \(Self.milliseconds(time)) ms) while suspended", "frozen", pid: pid, unit: unit
                )
                entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                log.append(entry)
            case (.thaw, .done(let time)):
                record.suspension.frozenUnit = nil
                record.suspension.thawRetries = 0
                var entry = Self.suspensionEntry(appName, "thawed (ThawUnit \(unit), \(Self.milliseconds(time)) ms)", "thawed", pid: pid, unit: unit)
                entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                log.append(entry)
            case (.freeze, .refused(let refusal)):
                self.freezeFailed(appName, &record, unit: unit, reason: refusal, in: &state, log: &log)
            case (.freeze, .failed(let error)):
                self.freezeFailed(appName, &record, unit: unit, reason: "FreezeUnit failed: \(error)", in: &state, log: &log)
            case (.thaw, .thawedMeanwhile):
                record.suspension.frozenUnit = nil
                record.suspension.thawRetries = 0
            case (.thaw, .failed(let error)):
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
                state.outbox.add(.arm(.unitRetry(appName), after: .seconds(1)))
                return
            case (.freeze, .thawedMeanwhile), (.thaw, .refused):
                return  // answers those calls do not get
            }
            // What the app's state asks now may differ from what the call did (woken while it was frozen).
            self.driveUnit(appName, &record, in: &state)
            self.settleSuspension(appName, &record, in: &state, log: &log)
        }
    }

    /// Asks systemd again for what the app's state wants of its unit, after a call that failed.
    func retryUnit(_ appName: AppName) {
        self.decide { state, _ in
            guard var record = state.records[appName] else { return }
            self.driveUnit(appName, &record, in: &state)
            state.records[appName] = record
        }
    }

    /// A unit that could not be frozen: the app's process is stopped instead, if it is still to be held.
    private func freezeFailed(
        _ appName: AppName,
        _ record: inout Record,
        unit: String,
        reason: String,
        in state: inout State,
        log: inout [LogEntry]
    ) {
        guard let held = record.suspension.held, held.how == .frozen else { return }
        record.suspension.held = nil
        log.append(
            Self.suspensionEntry(
                appName, "not frozen: \(reason); stopping pid \(held.process.pid) with SIGSTOP instead", "stopped",
                pid: held.process.pid, level: .notice, unit: unit
            )
        )
        self.stop(held.process, of: appName, &record, in: &state)
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
        self.decide { state, _ in
            for appName in state.records.keys where state.records[appName]!.suspension.frozenUnit != nil {
                var record = state.records[appName]!
                if record.suspension.held == nil { self.driveUnit(appName, &record, in: &state) }
                state.records[appName] = record
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
