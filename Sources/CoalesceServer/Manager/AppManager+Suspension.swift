import CoalesceCore
import Logging
import Synchronization
import NIOCore
import Systemd

/// What a registration does to the app's suspension mode.
enum SuspensionChange: Sendable {
    /// Left out: as before.
    case keep
    /// A mode, or `nil` for the configuration's.
    case set(SuspensionMode?)
}

/// Real suspension (DESIGN.md §5): a suspended app's process is stopped with SIGSTOP or its launch unit frozen with
/// systemd's cgroup freezer, a short delay after it is suspended and never while a callback or event it was sent is
/// unacknowledged; it is continued (thawed) when it leaves the suspended state, before anything is sent to it.
///
/// The core's ``SuspensionHold`` decides, one per app (`Record.suspension`); here it is fed and its actions queued.
/// ``settleSuspension(_:_:continuingAt:in:log:)`` runs after every input to the app's lifecycle (a wake, a purge,
/// an acknowledgement) and after a process attaches. Everything an app is sent while suspended follows a transition
/// out of that state (a suspended app receives nothing: the inbox holds its events), and that transition's input
/// queues its SIGCONT ahead of its callbacks; a process killed (a purge, a terminate of a suspended app) is killed as
/// it is, SIGKILL working on stopped and frozen tasks alike.
/// A process as an app's hold sees it: the same process when it is the same handle.
struct HeldProcess: Equatable, Sendable {
    let process: any AppProcess

    init(_ process: any AppProcess) { self.process = process }

    static func == (lhs: HeldProcess, rhs: HeldProcess) -> Bool { lhs.process === rhs.process }
}

extension AppManager {
    typealias Hold = SuspensionHold<HeldProcess>

    /// The mode the app is suspended by: its own, or the configuration's.
    func suspensionMode(of record: Record) -> SuspensionMode {
        record.registration.suspension ?? self.daemon.configuration.suspension
    }

    /// The app as its hold needs to see it, in this decision.
    private func situation(of record: Record, in state: State) -> Hold.Situation {
        record.holdSituation(mode: self.suspensionMode(of: record), firstSequence: self.firstSequence, killing: state.kills)
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
        let actions = record.suspension.settle(self.situation(of: record, in: state))
        self.queueHold(actions, of: appName, &record, continuingAt: continuingAt, in: &state, log: &log)
    }

    /// ``settleSuspension(_:_:continuingAt:in:log:)`` for an app where it lies in the state.
    func settleSuspension(_ appName: AppName, in state: inout State, log: inout [LogEntry]) {
        guard var record = state.records[appName] else { return }
        self.settleSuspension(appName, &record, in: &state, log: &log)
        state.records[appName] = record
    }

    /// Queues what the app's hold decided: signals, unit calls, timers, journal entries.
    /// - Parameter pid: the process the journal names for a unit's answer.
    private func queueHold(
        _ actions: [Hold.Action],
        of appName: AppName,
        _ record: inout Record,
        continuingAt position: Int? = nil,
        pid: Int32? = nil,
        in state: inout State,
        log: inout [LogEntry]
    ) {
        for action in actions {
            switch action {
            case .armDelay:
                state.outbox.add(self.arming(.suspensionDelay(appName), after: self.daemon.configuration.suspensionDelay))
            case .cancelDelay:
                state.outbox.add(self.arming(.suspensionDelay(appName), after: nil))
            case .stop(let held, let reason):
                let process = held.process
                // Why it is stopped rather than frozen goes out before the line saying it was stopped, in the
                // outbox's order.
                switch reason {
                case .mode: break
                case .notInUnit(let unit):
                    state.outbox.add(.log(Self.suspensionEntry(
                        appName, "pid \(process.pid) does not run in its launch unit \(unit); stopping it instead of freezing",
                        "stopped", pid: process.pid, level: .notice, unit: unit
                    )))
                case .notFrozen(let unit, let reason):
                    state.outbox.add(.log(Self.suspensionEntry(
                        appName, "not frozen: \(reason); stopping pid \(process.pid) with SIGSTOP instead", "stopped",
                        pid: process.pid, level: .notice, unit: unit
                    )))
                }
                let entry = Self.suspensionEntry(appName, "stopped (SIGSTOP) while suspended", "stopped", pid: process.pid)
                state.outbox.add(.stopProcess(process, entry))
            case .continue(let held):
                let process = held.process
                let entry = Self.suspensionEntry(appName, "continued (SIGCONT)", "continued", pid: process.pid)
                if let position {
                    state.outbox.insert(.continueProcess(process, entry), at: position)
                } else {
                    state.outbox.add(.continueProcess(process, entry))
                }
            case .freeze(let unit):
                state.outbox.add(.unitCall(appName, .freeze(unit: unit)))
            case .thaw(let unit):
                state.outbox.add(.unitCall(appName, .thaw(unit: unit, process: record.process?.handle)))
            case .retryLater:
                state.outbox.add(self.arming(.unitRetry(appName), after: .seconds(1)))
            case .released:
                // A process taken up after a restart of the daemon could not attach again while it was held: its
                // time to attach again starts now.
                if record.attachment == nil, record.restored?.timeoutArmed == false,
                    let timeout = self.daemon.configuration.launchTimeout
                {
                    record.restored?.timeoutArmed = true
                    state.outbox.add(self.arming(.reattach(appName), after: timeout))
                }
            case .frozen(let unit, let time):
                var entry = Self.suspensionEntry(
                    appName, "frozen (FreezeUnit \(unit), \(Self.milliseconds(time)) ms) while suspended", "frozen", pid: pid, unit: unit
                )
                entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                log.append(entry)
            case .thawed(let unit, let time):
                var entry = Self.suspensionEntry(appName, "thawed (ThawUnit \(unit), \(Self.milliseconds(time)) ms)", "thawed", pid: pid, unit: unit)
                entry.metadata["duration_ms"] = "\(Self.milliseconds(time))"
                log.append(entry)
            case .cannotThaw(let unit, let reason):
                log.append(Self.suspensionEntry(
                    appName, "cannot thaw \(unit): \(reason); asking again every second (`systemctl thaw \(unit)` continues it)",
                    "thawFailed", pid: pid, level: .error, unit: unit
                ))
            }
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
            let unit = record.registration.launchUnit
            let probed = candidate.map { HeldProcess($0.process) == record.attachment?.process.map(HeldProcess.init) && $0.unit == unit } ?? false
            let actions = record.suspension.delayEnded(
                self.situation(of: record, in: state), launchUnit: unit, runsInUnit: probed && runsInUnit
            )
            self.queueHold(actions, of: appName, &record, in: &state, log: &log)
            state.records[appName] = record
        }
    }

    /// Makes a unit call, off the caller's thread; its answer is decided by the app's hold.
    func call(_ call: UnitCall, for appName: AppName) {
        let control = self.unitControl
        Task {
            let start = ContinuousClock.now
            let answer: Hold.UnitAnswer
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
                    answer = .failed("\(error)")
                }
            }
            self.decide { state, log in
                guard var record = state.records[appName] else { return }
                let pid = record.suspension.held?.process.process.pid ?? record.process?.pid
                let freezing = if case .freeze = call { true } else { false }
                let actions = record.suspension.unitAnswered(
                    freezing: freezing, unit: call.unit, answer, self.situation(of: record, in: state)
                )
                self.queueHold(actions, of: appName, &record, pid: pid, in: &state, log: &log)
                state.records[appName] = record
            }
        }
    }

    /// Asks systemd again for what the app's state wants of its unit, after a call that failed.
    func retryUnit(_ appName: AppName) {
        self.decide { state, log in
            guard var record = state.records[appName] else { return }
            self.queueHold(record.suspension.retry(), of: appName, &record, in: &state, log: &log)
            state.records[appName] = record
        }
    }

    /// Takes up, at start-up, a process of an app taken up suspended that an earlier run stopped or froze: it stays
    /// so until the app is woken; one that is held while its app is not suspended is continued.
    static func takeUpHold(_ appName: AppName, _ record: inout Record, process: any AppProcess, logger: Logger) {
        let frozenUnit = record.registration.launchUnit.flatMap { process.runs(in: $0) && process.isFrozen ? $0 : nil }
        let how: ProcessHold? = frozenUnit != nil ? .frozen : process.isStopped ? .stopped : nil
        guard let how else { return }
        if record.lifecycle.state == .suspended {
            record.suspension.takeUp(held: Hold.Held(process: HeldProcess(process), how: how, unit: frozenUnit), frozenUnit: frozenUnit)
            logger.info(
                "\(appName): pid \(process.pid) is \(how.rawValue) as the daemon's last run left it; held until the app is woken",
                metadata: ["app": "\(appName)", "pid": "\(process.pid)", "suspension": "\(how.rawValue)"]
            )
            return
        }
        // A frozen unit of an app that is not suspended is thawed once the manager runs (``thawLeftOver()``).
        record.suspension.takeUp(held: nil, frozenUnit: frozenUnit)
        if how == .stopped {
            process.signal(.continue)
            let entry = Self.suspensionEntry(appName, "continued (SIGCONT): it is \(record.lifecycle.state.rawValue)", "continued", pid: process.pid)
            logger.log(level: entry.level, "\(entry.message)", metadata: entry.metadata)
        }
    }

    /// Thaws, once the manager runs, the units an earlier run left frozen whose apps are not suspended.
    func thawLeftOver() {
        self.decide { state, log in
            for appName in state.records.keys where state.records[appName]!.suspension.frozenUnit != nil {
                var record = state.records[appName]!
                self.queueHold(record.suspension.retry(), of: appName, &record, in: &state, log: &log)
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
