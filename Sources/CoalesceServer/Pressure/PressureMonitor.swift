import CoalesceCore
import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

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
    /// The trigger descriptors (warning, critical), when in trigger mode.
    private let triggers: [(level: PressureLevel, fd: Int32)]
    /// Written to by ``stop()`` to wake the thread.
    private let wake: (read: Int32, write: Int32)
    /// The thread, while it runs.
    private let thread = Mutex<pthread_t?>(nil)

    /// Tests the file and the triggers: the mode is decided here, once.
    init(settings: MemorySettings, apps: AppManager, logger: Logger) {
        self.settings = settings
        self.apps = apps
        self.logger = logger
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        } else {
            ends = [-1, -1]
        }
        self.wake = (ends[0], ends[1])
        let path = settings.path
        var made: [(level: PressureLevel, fd: Int32)] = []
        let mode: Mode
        if !settings.enabled {
            mode = .off("Pressure=no")
        } else if case .failure(let reason) = Self.read(path) {
            mode = .off("cannot read \(path): \(reason)")
        } else {
            var failure: String?
            for (level, threshold) in [(PressureLevel.warning, settings.warning), (.critical, settings.critical)] {
                switch Self.trigger(path, threshold) {
                case .success(let fd): made.append((level, fd))
                case .failure(let code):
                    var reason = "cannot make the trigger '\(threshold.triggerText)' on \(path): \(String(cString: strerror(code)))"
                    if threshold.window.components.seconds % 2 != 0 || threshold.window.components.attoseconds != 0 {
                        reason += "; without CAP_SYS_RESOURCE a trigger's window must be a multiple of 2s"
                    }
                    failure = failure ?? reason
                }
            }
            if let failure {
                for trigger in made { close(trigger.fd) }
                made = []
                mode = .polling(failure)
            } else {
                mode = .triggers
            }
        }
        self.triggers = made
        self.status = Mutex(Status(mode: mode, path: path, warning: settings.warning, critical: settings.critical))
    }

    deinit {
        for trigger in self.triggers { close(trigger.fd) }
        if self.wake.read >= 0 {
            close(self.wake.read)
            close(self.wake.write)
        }
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
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(
            &thread,
            nil,
            { context in
                let monitor = Unmanaged<PressureMonitor>.fromOpaque(context!).takeRetainedValue()
                Systemd.nameThisThread("coalesced-psi")
                monitor.run()
                return nil
            },
            context
        )
        guard started == 0 else {
            Unmanaged<PressureMonitor>.fromOpaque(context).release()
            self.give(up: "cannot start its thread: \(String(cString: strerror(started)))")
            return
        }
        self.thread.withLock { $0 = thread }
    }

    /// Stops the thread and waits for it to end; nothing is decided after it returns. Calling it again does nothing.
    func stop() {
        guard let thread = self.thread.withLock({ $0.take() }) else { return }
        var byte: UInt8 = 1
        _ = write(self.wake.write, &byte, 1)
        pthread_join(thread, nil)
    }

    /// The thread: waits for a trigger, the policy's next reading or the polling interval; reads and decides.
    private func run() {
        var policy = MemoryPressurePolicy<ContinuousClock.Instant>(warning: self.settings.warning, critical: self.settings.critical)
        let polling = self.triggers.isEmpty
        var descriptors = self.triggers.map { pollfd(fd: $0.fd, events: Int16(POLLPRI), revents: 0) }
        descriptors.append(pollfd(fd: self.wake.read, events: Int16(POLLIN), revents: 0))
        var nextPoll = ContinuousClock.now
        while true {
            var wakeAt = policy.nextReading
            if polling { wakeAt = min(wakeAt ?? nextPoll, nextPoll) }
            let timeout: Int32 = wakeAt.map { at in
                let left = ContinuousClock.now.duration(to: at)
                return left <= .zero ? 0 : Int32(clamping: (left.nanoseconds + 999_999) / 1_000_000)
            } ?? -1
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                self.give(up: "poll failed: \(String(cString: strerror(errno)))")
                return
            }
            if descriptors.last!.revents != 0 { return }  // stop()
            var fired: Set<PressureLevel> = []
            for (index, trigger) in self.triggers.enumerated() {
                let events = descriptors[index].revents
                if events & Int16(POLLERR) != 0 {
                    // The file is gone (its cgroup removed): nothing more will fire.
                    self.give(up: "the trigger on \(self.settings.path) failed (the cgroup was removed?)")
                    return
                }
                if events & Int16(POLLPRI) != 0 { fired.insert(trigger.level) }
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
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(String(cString: strerror(errno))) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        var count = 0
        while count < buffer.count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0, errno == EINTR { continue }
            if got < 0 { return .failure(String(cString: strerror(errno))) }
            if got == 0 { break }
            count += got
        }
        guard let reading = PressureReading(parsing: String(decoding: buffer[..<count], as: UTF8.self)) else {
            return .failure("not a pressure file (expected lines 'some avg10=… total=…')")
        }
        return .success(reading)
    }

    enum TriggerResult {
        case success(Int32)
        case failure(Int32)
    }

    /// Opens the file and writes the threshold to it, NUL included, as the kernel's documentation does: the
    /// descriptor is then a trigger, which poll reports with POLLPRI.
    static func trigger(_ path: String, _ threshold: StallThreshold) -> TriggerResult {
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(errno) }
        let text = threshold.triggerText
        let written = text.withCString { write(fd, $0, strlen($0) + 1) }
        guard written >= 0 else {
            let code = errno
            close(fd)
            return .failure(code)
        }
        return .success(fd)
    }
}
