import CoalesceCore
import Synchronization
import Systemd

/// The timers ``AlertScheduler`` asks for (``AlertAction/arm(wall:boot:)``), and the two changes it must be told of
/// (a clock set, the machine's zone changed), on one thread of its own that waits in `poll` and never spins:
/// - a `CLOCK_REALTIME` timerfd armed at the wall date with `TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET`: when
///   anyone sets the clock its read fails with `ECANCELED`, which is reported as ``Event/clockChanged``, and it is
///   armed again at the same date so that the next change is seen too. With no wall date it stays armed at
///   ``idleWallDate`` (the year 2200), so clock changes are reported for the timer's whole life;
/// - a `CLOCK_BOOTTIME` timerfd armed at the boot date;
/// - an inotify watch on the directory of the machine's zone link (`/etc/localtime`): timedatectl replaces the link
///   by a rename, which a watch on the link itself would not see. A change of that name is reported as
///   ``Event/timeZoneChanged``, a burst of them (`ln -sf` removes, then creates) as one;
/// - an eventfd that wakes the thread to stop, or to report a clock change ``arm(wall:boot:)`` came upon.
///
/// `onEvent` runs on that thread, one event at a time; it may call ``arm(wall:boot:)`` and ``stop()``.
final class AlertTimer: Sendable {
    /// What the timer reports.
    enum Event: Sendable, Hashable {
        /// The wall or the boot-time timer expired (once per expiry): call ``AlertScheduler/fired(now:)``.
        case expired
        /// The wall clock was set: call ``AlertScheduler/clockChanged(now:)``.
        case clockChanged
        /// The machine's zone link changed: read it again (``ZoneDatabase/local()``) and call
        /// ``AlertScheduler/timeZoneChanged(to:now:)``.
        case timeZoneChanged
    }

    /// Where the wall timer waits when no wall date is pending: it stays armed, with `TFD_TIMER_CANCEL_ON_SET`, only
    /// to report clock changes. 2200-01-01T00:00:00Z.
    static let idleWallDate = WallTime(seconds: 7_258_118_400)

    /// How long a report of the zone link waits for the rest of its burst: the changes within this time of the
    /// first one are reported together, at its end.
    static let zoneSettleTime: Duration = .milliseconds(100)

    private let core: Core
    private let thread: DedicatedThread

    /// Creates the descriptors and starts the thread.
    /// - Parameters:
    ///   - localtimePath: the machine's zone link; its directory is watched for changes of its name.
    ///   - zoneSettle: how long a zone report waits for the rest of its burst (``zoneSettleTime``).
    ///   - watchingZone: whether the zone link is watched from the start, or from ``watchZone()`` on (each watch
    ///     takes one of the user's inotify instances, `fs.inotify.max_user_instances`).
    ///   - onEvent: called on the timer's thread for each event.
    /// - Throws: ``AlertTimerError`` naming the call that failed (no descriptor is left open).
    init(
        localtimePath: String = "/etc/localtime",
        zoneSettle: Duration = AlertTimer.zoneSettleTime,
        watchingZone: Bool = true,
        onEvent: @escaping @Sendable (AlertTimer.Event) -> Void
    ) throws(AlertTimerError) {
        let core = try Core(localtimePath: localtimePath, settle: zoneSettle, onEvent: onEvent)
        if watchingZone { _ = core.watchZone() }
        let thread: DedicatedThread
        do throws(SystemdError) {
            thread = try DedicatedThread { core.run() }
        } catch {
            core.closeDescriptors()
            throw AlertTimerError(error)
        }
        self.core = core
        self.thread = thread
    }

    deinit { self.stop() }

    /// Arms both timers, replacing what they were. A date already past expires at once; `nil` disarms that timer
    /// (the wall timer then waits at ``idleWallDate``, still watching for clock changes). Callable from any
    /// thread, `onEvent` included; after ``stop()`` it does nothing.
    func arm(wall: WallTime?, boot: BootTime?) {
        self.core.arm(wall: wall, boot: boot)
    }

    /// Stops the thread, waits for it to end and closes the descriptors; no event is reported after it returns
    /// (called from `onEvent`, none after that call, and the thread closes them as it ends). Calling it again does
    /// nothing, and returns at once.
    func stop() {
        guard self.core.requestStop() else { return }
        if self.thread.isCurrent {
            // Called from onEvent: the thread ends (and closes the descriptors) once onEvent returns.
            self.thread.detach()
        } else {
            self.thread.join()
        }
    }

    /// Starts watching the machine's zone link (at once when the timer was made with `watchingZone`), once; later
    /// calls do nothing. Returns why it cannot be watched, the first time, when it cannot: the timers work
    /// regardless, and ``Event/timeZoneChanged`` is never reported.
    @discardableResult
    func watchZone() -> AlertTimerError? {
        self.core.watchZone()
    }

    /// Both clocks, read one after the other.
    static func now() -> ClockReading {
        ClockReading(
            wall: WallTime(nanoseconds: Self.nanoseconds(of: .realtime)),
            boot: BootTime(nanoseconds: Self.nanoseconds(of: .boottime)))
    }

    private static func nanoseconds(of clock: SystemClock) -> Int64 {
        do {
            return try clock.read().totalNanoseconds
        } catch {
            // Fails only for a clock the kernel does not have; both are in every kernel Linux 2.6.39 and later.
            preconditionFailure("\(error.operation) failed: \(error.reason)")
        }
    }
}

/// Why an ``AlertTimer`` could not start: the system call that failed and its error.
struct AlertTimerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call, with what it was given when that helps (`inotify_add_watch(/etc)`).
    var call: String
    /// Its errno.
    var code: Int32

    var description: String {
        "the alert timer cannot start: \(self.failure)"
    }

    /// The call and what it failed with: `inotify_init1 failed: Too many open files`.
    var failure: String { "\(self.call) failed: \(SystemdError.reason(self.code))" }
}

extension AlertTimerError {
    /// The call a ``Systemd`` wrapper made (its operation names it, as `timerfd_create(CLOCK_REALTIME)`), and its
    /// errno.
    init(_ error: SystemdError) {
        self.init(call: error.operation, code: error.errno)
    }
}

extension AlertTimer {
    /// The descriptors and the state the thread and the callers share. The thread holds this and not the
    /// ``AlertTimer``, so that dropping the last reference to the timer stops it (its deinit).
    fileprivate final class Core: Sendable {
        let realtime: TimerFD
        let boottime: TimerFD
        let wakeup: Wakeup
        /// The directory of the zone link, which the inotify watch is on.
        let linkDirectory: String
        /// The zone link's name within its directory, whose events count.
        let linkName: [UInt8]
        let settleNanoseconds: Int64
        let onEvent: @Sendable (AlertTimer.Event) -> Void
        let state = Mutex(State())

        struct State: Sendable {
            /// Set by ``AlertTimer/stop()``; after it nothing is armed, and the thread ends.
            var stopping = false
            /// The descriptors are closed (by the thread, as it ends).
            var closed = false
            /// The wall date armed; `nil` when the wall timer waits at ``AlertTimer/idleWallDate``.
            var wall: WallTime?
            /// ``arm(wall:boot:)`` found the clock set (timerfd_settime's `ECANCELED`); the thread reports it.
            var clockChangeUnreported = false
            /// The inotify watch on the zone link's directory, once ``AlertTimer/watchZone()`` made it (`nil` before,
            /// or when it could not be made); kept until the descriptors are closed.
            var zone: Inotify?
            /// Why the zone link is not watched, when making the watch failed.
            var zoneWatchProblem: AlertTimerError?
            var zoneWatchTried = false
        }

        init(localtimePath: String, settle: Duration, onEvent: @escaping @Sendable (AlertTimer.Event) -> Void)
            throws(AlertTimerError)
        {
            // A descriptor made before a failure is closed as its wrapper goes, before the error is thrown.
            do {
                self.realtime = try TimerFD(clock: .realtime)
                self.boottime = try TimerFD(clock: .boottime)
                self.wakeup = try Wakeup()
            } catch {
                throw AlertTimerError(error)
            }
            let (directory, name) = Self.split(localtimePath)
            self.linkDirectory = directory
            self.linkName = Array(name.utf8)
            self.settleNanoseconds = settle.nanosecondsCount
            self.onEvent = onEvent
            // Watching for clock changes from the start.
            let armed = Self.settime(self.realtime, AlertTimer.idleWallDate.nanoseconds)
            guard armed == 0 else { throw AlertTimerError(call: "timerfd_settime(CLOCK_REALTIME)", code: armed) }
        }

        /// The directory and the name of `path` (`/etc`, `localtime`); a bare name is in the working directory.
        static func split(_ path: String) -> (directory: String, name: String) {
            guard let slash = path.lastIndex(of: "/") else { return (".", path) }
            let directory = String(path[..<slash])
            return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
        }

        func arm(wall: WallTime?, boot: BootTime?) {
            let wake = self.state.withLock { state -> Bool in
                guard !state.stopping else { return false }
                state.wall = wall
                let wallResult = Self.settime(self.realtime, (wall ?? AlertTimer.idleWallDate).nanoseconds)
                let bootResult = Self.settime(self.boottime, boot?.nanoseconds)
                precondition(
                    bootResult == 0, "timerfd_settime(CLOCK_BOOTTIME) failed: \(SystemdError.reason(bootResult))")
                // ECANCELED: the clock was set since the last read, and this call armed the timer anyway (see
                // timerfd_create(2), NOTES), which cleared the mark the thread would have read.
                guard wallResult != Errno.ECANCELED else {
                    state.clockChangeUnreported = true
                    return true
                }
                precondition(
                    wallResult == 0, "timerfd_settime(CLOCK_REALTIME) failed: \(SystemdError.reason(wallResult))")
                return false
            }
            if wake { self.wake() }
        }

        /// Makes the inotify watch on the zone link's directory, once, and has the thread poll it. The watch is worth
        /// having, not worth failing over: without it (the user's inotify instances used up, say) dates still fire.
        func watchZone() -> AlertTimerError? {
            self.state.withLock { state -> AlertTimerError? in
                guard !state.zoneWatchTried, !state.stopping else { return nil }
                state.zoneWatchTried = true
                do throws(SystemdError) {
                    let inotify = try Inotify()
                    // An instance that cannot watch is closed as it goes, at the end of this block.
                    try inotify.watch(
                        self.linkDirectory,
                        for: [
                            .created, .movedTo, .movedFrom, .deleted, .closedAfterWriting, .attributesChanged,
                            .onlyDirectory,
                        ])
                    state.zone = inotify
                    self.wake()  // the thread polls it from its next round
                } catch {
                    state.zoneWatchProblem = AlertTimerError(error)
                }
                return state.zoneWatchProblem
            }
        }

        /// Marks the timer stopping and wakes the thread; whether this call was the first to.
        func requestStop() -> Bool {
            self.state.withLock { state in
                guard !state.stopping else { return false }
                state.stopping = true
                // Written under the lock: the thread closes the eventfd only under it, and only once stopping.
                self.wake()
                return true
            }
        }

        private func wake() {
            self.wakeup.set()
        }

        func closeDescriptors() {
            self.state.withLock { state in
                guard !state.closed else { return }
                state.closed = true
                self.realtime.close()
                self.boottime.close()
                state.zone?.close()
                self.wakeup.close()
            }
        }

        /// Arms `timer` at the absolute time `nanoseconds` (`nil`: disarms it), the wall timer watching for clock
        /// changes; 0, or the errno.
        static func settime(_ timer: TimerFD, _ nanoseconds: Int64?) -> CInt {
            do {
                try timer.arm(at: nanoseconds.map { .nanoseconds($0) }, cancelOnSet: timer.clock == .realtime)
                return 0
            } catch {
                return error.errno
            }
        }

        // MARK: The thread

        func run() {
            Systemd.nameThisThread("coalesced-timer")
            var descriptors = [self.wakeup.descriptor, -1, self.boottime.descriptor, self.realtime.descriptor].map {
                (descriptor: $0, events: Poll.Events.readable)
            }
            // When the burst of zone changes being gathered is reported (CLOCK_MONOTONIC nanoseconds).
            var zoneReportDue: Int64?
            running: while true {
                // The zone watch, once made (poll passes over a negative descriptor).
                let zone = self.state.withLock { $0.zone }
                descriptors[1].descriptor = zone?.descriptor ?? -1
                // No timeout but while a zone report waits for the end of its burst: the thread never spins.
                let timeout = zoneReportDue.map { Duration.nanoseconds($0 - Self.monotonicNow()) }
                let readable: [Bool]
                do throws(SystemdError) {
                    readable = try Poll.wait(descriptors, timeout: timeout).map { !$0.isEmpty }
                } catch {
                    if [Errno.EINTR, Errno.EAGAIN, Errno.ENOMEM].contains(error.errno) { continue }
                    preconditionFailure("poll failed: \(error.reason)")
                }
                if readable[0] {
                    self.wakeup.clear()
                    let (stopping, clockChanged) = self.state.withLock { state in
                        defer { state.clockChangeUnreported = false }
                        return (state.stopping, state.clockChangeUnreported)
                    }
                    if stopping { break running }
                    if clockChanged { self.report(.clockChanged) }
                }
                // The zone before the timers, so that a report of it comes before an expiry it happened before.
                if readable[1], let zone, self.drainZoneEvents(zone) {
                    zoneReportDue = zoneReportDue ?? Self.monotonicNow() + self.settleNanoseconds
                }
                if let due = zoneReportDue, Self.monotonicNow() >= due {
                    zoneReportDue = nil
                    self.report(.timeZoneChanged)
                }
                if readable[2], Self.readExpiry(self.boottime) == 0 { self.report(.expired) }
                if readable[3] { self.handleWallTimer() }
                if self.state.withLock({ $0.stopping }) { break running }
            }
            self.closeDescriptors()
        }

        /// Calls onEvent, unless the timer is stopping.
        private func report(_ event: AlertTimer.Event) {
            guard !self.state.withLock({ $0.stopping }) else { return }
            self.onEvent(event)
        }

        private func handleWallTimer() {
            switch Self.readExpiry(self.realtime) {
            case 0:
                // Expired: it waits at the idle date, still watching for clock changes, unless armed again since.
                self.state.withLock { state in
                    // A timer that cannot be read (not expected: it is open until the thread ends) is left as it is.
                    guard !state.stopping, (try? self.realtime.isArmed()) == false else { return }
                    state.wall = nil
                    // ECANCELED here is a clock set since the read: the report is left to the next arm or expiry.
                    _ = Self.settime(self.realtime, AlertTimer.idleWallDate.nanoseconds)
                }
                self.report(.expired)
            case Errno.ECANCELED:
                // The clock was set. Armed again at the same date before the report, so that a change made after the
                // report is read is seen; one made in between is covered by the report, as the reader reads the clock
                // after it. A date the clock was set past expires at once and is reported as an expiry next.
                self.state.withLock { state in
                    guard !state.stopping else { return }
                    _ = Self.settime(self.realtime, (state.wall ?? AlertTimer.idleWallDate).nanoseconds)
                }
                self.report(.clockChanged)
            default:
                return  // EAGAIN: armed again between the poll and the read
            }
        }

        /// Reads a timerfd's expiry count: 0 when it expired, else the errno (`EAGAIN`: it has not, `ECANCELED`: the
        /// clock was set).
        private static func readExpiry(_ timer: TimerFD) -> CInt {
            do {
                try timer.readExpirations()
                return 0
            } catch {
                return error.errno
            }
        }

        /// Reads every queued inotify event; whether one was about the zone link (or events were lost).
        private func drainZoneEvents(_ zone: Inotify) -> Bool {
            zone.readEvents().contains { $0.events.contains(.queueOverflowed) || $0.name == self.linkName }
        }

        private static func monotonicNow() -> Int64 {
            SystemClock.monotonic.now().totalNanoseconds
        }
    }
}

extension Duration {
    fileprivate var nanosecondsCount: Int64 {
        self.components.seconds * 1_000_000_000 + self.components.attoseconds / 1_000_000_000
    }
}
