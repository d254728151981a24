import CoalesceCore
import Logging
import Synchronization
import Systemd

/// Follows memory pressure: the shell around ``MemoryPressurePolicy``. It reads the PSI file
/// (`/proc/pressure/memory`, or `[Memory] PressureFile=`), feeds the policy, and carries its decisions out through
/// the apps' manager (didReceiveMemoryWarning, purges).
///
/// At start it tries to make one kernel trigger per level (each its own descriptor, the level's threshold written
/// to it); when both are made it waits for them on a thread of its own (`poll` for POLLPRI), reading the file only
/// when one fires and when the policy asks (``MemoryPressurePolicy/nextReading``). Where a trigger cannot be made
/// (an unprivileged daemon whose windows are not multiples of 2 s, a kernel without triggers) it reads the file
/// every half of the shortest window instead. The mode in force is logged and shown in Stats.
final class PressureMonitor: Sendable {
    enum Mode: Sendable, Equatable {
        /// Kernel triggers on the file.
        case triggers
        /// Reading the file periodically, because a trigger could not be made (the reason).
        case polling(String)
        /// Not following memory pressure (the reason).
        case off(String)

        var name: String {
            switch self {
            case .triggers: "triggers"
            case .polling: "polling"
            case .off: "off"
            }
        }

        var reason: String? {
            switch self {
            case .triggers: nil
            case .polling(let reason), .off(let reason): reason
            }
        }
    }

    /// What Stats shows.
    struct Status: Sendable {
        var mode: Mode
        var path: String
        var warning: StallThreshold
        var critical: StallThreshold
        var level: PressureLevel = .normal
        var reading: PressureReading?
        /// Times running apps were warned, and apps purged, since start.
        var warnings = 0
        var purges = 0
    }

    let settings: MemorySettings
    private let apps: AppManager
    private let logger: Logger
    private let status: Mutex<Status>
    /// The triggers (warning, critical), when in trigger mode.
    private let triggers: [(level: PressureLevel, trigger: PressureTrigger)]
    /// Set by ``stop()`` to wake the thread; `nil` when it could not be made, and then the monitor is off.
    private let wake: Wakeup?
    /// The thread, while it runs.
    private let thread = Mutex<DedicatedThread?>(nil)

    /// Tests the file and the triggers: the mode is decided here, once.
    init(settings: MemorySettings, apps: AppManager, logger: Logger) {
        self.settings = settings
        self.apps = apps
        self.logger = logger
        var wake: Wakeup?
        var wakeFailure: SystemdError?
        do throws(SystemdError) {
            wake = try Wakeup()
        } catch {
            wakeFailure = error
        }
        self.wake = wake
        let path = settings.path
        var made: [(level: PressureLevel, trigger: PressureTrigger)] = []
        let mode: Mode
        if !settings.enabled {
            mode = .off("Pressure=no")
        } else if let wakeFailure {
            // Without it stop() could not wake the thread, which would then hold the daemon's shutdown.
            mode = .off("cannot make the wakeup of its thread: \(wakeFailure.reason)")
        } else if case .failure(let reason) = Self.read(path) {
            mode = .off("cannot read \(path): \(reason)")
        } else {
            var failure: String?
            for (level, threshold) in [(PressureLevel.warning, settings.warning), (.critical, settings.critical)] {
                do throws(SystemdError) {
                    made.append((level, try PressureTrigger(path: path, threshold: threshold.triggerText)))
                } catch {
                    let cause = error.reason
                    var reason = "cannot make the trigger '\(threshold.triggerText)' on \(path): \(cause)"
                    if threshold.window.components.seconds % 2 != 0 || threshold.window.components.attoseconds != 0 {
                        reason += "; without CAP_SYS_RESOURCE a trigger's window must be a multiple of 2s"
                    }
                    failure = failure ?? reason
                }
            }
            if let failure {
                for made in made { made.trigger.close() }
                made = []
                mode = .polling(failure)
            } else {
                mode = .triggers
            }
        }
        self.triggers = made
        self.status = Mutex(Status(mode: mode, path: path, warning: settings.warning, critical: settings.critical))
    }

    var snapshot: Status { self.status.withLock { $0 } }

    var mode: Mode { self.status.withLock { $0.mode } }

    /// How often the file is read in polling mode: half the shortest window.
    var pollInterval: Duration { min(self.settings.warning.window, self.settings.critical.window) / 2 }

    /// Logs the mode and starts the thread (none when off).
    func start() {
        let mode = self.mode
        let levels = "warning at \(self.settings.warning), critical at \(self.settings.critical)"
        var metadata: Logger.Metadata = [
            "pressure_mode": "\(mode.name)", "pressure_file": "\(self.settings.path)",
            "pressure_warning": "\(self.settings.warning)", "pressure_critical": "\(self.settings.critical)",
        ]
        if let reason = mode.reason { metadata["reason"] = "\(reason)" }
        switch mode {
        case .triggers:
            self.logger.notice("Memory pressure: kernel triggers on \(self.settings.path), \(levels)", metadata: metadata)
        case .polling(let reason):
            self.logger.notice(
                "Memory pressure: reading \(self.settings.path) every \(self.pollInterval.settingText) (\(reason)), \(levels)",
                metadata: metadata
            )
        case .off(let reason):
            if self.settings.enabled {
                self.logger.warning("Memory pressure is not followed: \(reason)", metadata: metadata)
            } else {
                self.logger.info("Memory pressure is not followed (Pressure=no)", metadata: metadata)
            }
            return
        }
        let thread: DedicatedThread
        do throws(SystemdError) {
            thread = try DedicatedThread {
                Systemd.nameThisThread("coalesced-psi")
                self.run()
            }
        } catch {
            self.give(up: "cannot start its thread: \(error.reason)")
            return
        }
        self.thread.withLock { $0 = thread }
    }

    /// Stops the thread and waits for it to end; nothing is decided after it returns. Calling it again does nothing.
    func stop() {
        guard let thread = self.thread.withLock({ $0.take() }) else { return }
        self.wake?.set()
        thread.join()
    }

    /// The thread: waits for a trigger, the policy's next reading or the polling interval; reads and decides.
    private func run() {
        var policy = MemoryPressurePolicy<ContinuousClock.Instant>(warning: self.settings.warning, critical: self.settings.critical)
        let polling = self.triggers.isEmpty
        // start() runs the thread only when the wakeup was made.
        guard let wake = self.wake else { return }
        var descriptors = self.triggers.map { (descriptor: $0.trigger.descriptor, events: Poll.Events.priority) }
        descriptors.append((wake.descriptor, .readable))
        var nextPoll = ContinuousClock.now
        while true {
            var wakeAt = policy.nextReading
            if polling { wakeAt = min(wakeAt ?? nextPoll, nextPoll) }
            let reported: [Poll.Events]
            do throws(SystemdError) {
                reported = try Poll.wait(descriptors, timeout: wakeAt.map { ContinuousClock.now.duration(to: $0) })
            } catch {
                if error.errno == Errno.EINTR { continue }
                self.give(up: "poll failed: \(error.reason)")
                return
            }
            if !reported.last!.isEmpty { return }  // stop()
            var fired: Set<PressureLevel> = []
            for (index, trigger) in self.triggers.enumerated() {
                let events = reported[index]
                if events.contains(.error) {
                    // The file is gone (its cgroup removed): nothing more will fire.
                    self.give(up: "the trigger on \(self.settings.path) failed (the cgroup was removed?)")
                    return
                }
                if events.contains(.priority) { fired.insert(trigger.level) }
            }
            let now = ContinuousClock.now
            if polling, now >= nextPoll { nextPoll = now + self.pollInterval }
            guard case .success(let reading) = Self.read(self.settings.path) else {
                self.give(up: "cannot read \(self.settings.path) any more")
                return
            }
            let decisions = policy.observe(reading, fired: fired, now: now)
            self.status.withLock {
                $0.reading = reading
                $0.level = policy.level
            }
            for decision in decisions {
                switch decision {
                case .level(_, let to): self.logLevel(to, reading)
                case .warn:
                    let warned = self.apps.warnOfMemoryPressure()
                    self.status.withLock { $0.warnings += 1 }
                    // Each window while the pressure lasts: the level's entry is what the journal keeps by default.
                    self.logger.debug(
                        "Memory pressure: \(warned) running app\(warned == 1 ? "" : "s") told didReceiveMemoryWarning",
                        metadata: Self.figures(reading, level: policy.level).merging(["apps": "\(warned)"]) { _, new in new }
                    )
                case .purge:
                    if self.apps.purgeUnderPressure(Self.figures(reading, level: policy.level)) != nil {
                        self.status.withLock { $0.purges += 1 }
                    } else {
                        policy.nothingLeftToPurge()
                    }
                }
            }
        }
    }

    /// The level reached, with the figures read.
    private func logLevel(_ to: PressureLevel, _ reading: PressureReading) {
        let metadata = Self.figures(reading, level: to)
        let figures = "some avg10=\(reading.some.avg10), full avg10=\(reading.full.avg10)"
        switch to {
        case .critical:
            self.logger.warning("Memory pressure is critical (\(self.settings.critical) reached; \(figures)): purging suspended apps", metadata: metadata)
        case .warning:
            self.logger.notice("Memory pressure (\(self.settings.warning) reached; \(figures)): warning running apps", metadata: metadata)
        case .normal:
            self.logger.notice("Memory pressure is below the warning level again (\(figures))", metadata: metadata)
        }
    }

    private func give(up reason: String) {
        self.status.withLock { $0.mode = .off(reason) }
        self.logger.warning("Memory pressure is no longer followed: \(reason)", metadata: ["pressure_file": "\(self.settings.path)"])
    }

    /// The pressure as journal fields: COALESCED_PRESSURE_SOME_AVG10, …
    static func figures(_ reading: PressureReading, level: PressureLevel) -> Logger.Metadata {
        [
            "pressure_level": "\(level.rawValue)",
            "pressure_some_avg10": "\(reading.some.avg10)", "pressure_some_avg60": "\(reading.some.avg60)",
            "pressure_some_total": "\(reading.some.total)",
            "pressure_full_avg10": "\(reading.full.avg10)", "pressure_full_avg60": "\(reading.full.avg60)",
            "pressure_full_total": "\(reading.full.total)",
        ]
    }

    // MARK: The file

    enum ReadResult {
        case success(PressureReading)
        case failure(String)
    }

    /// Reads and parses the PSI file (a few hundred bytes).
    static func read(_ path: String) -> ReadResult {
        let bytes: [UInt8]
        do throws(SystemdError) {
            // Its first 512 bytes: the two lines of a pressure file are well within them.
            bytes = try ReadableFile(path).readPrefix(512)
        } catch {
            return .failure(error.reason)
        }
        guard let reading = PressureReading(parsing: String(decoding: bytes, as: UTF8.self)) else {
            return .failure("not a pressure file (expected lines 'some avg10=… total=…')")
        }
        return .success(reading)
    }
}
