import CoalesceCore
import CoalesceStore
import Logging
import Synchronization
import Systemd

/// logind's sleep, as an iOS device's: a delay inhibitor held while awake; PrepareForSleep(true) interrupts the
/// active app (willResignActive, reason `sleep`), waits for its acknowledgement, puts every pending write on disk,
/// and lets go of the inhibitor within logind's InhibitDelayMaxUSec; PrepareForSleep(false) takes the inhibitor
/// again, makes the interrupted app active (didBecomeActive, reason `wake`) and has the notifications handle what
/// came due meanwhile (``NotificationCenter/resumed()``).
///
/// What to do and when is decided by ``SleepPreparation`` (who is waited for and until when, who was late, when the
/// inhibitor is asked for and let go, whom the wake makes active); this carries it out on the bus, the manager, the
/// store and the journal, and feeds back what came of it. The steps follow systemd's "Taking Delay Locks"
/// (docs/INHIBITOR_LOCKS.md): the PrepareForSleep match is in place before the inhibitor is asked for, the inhibitor
/// is closed only once the preparation is done, and it is taken again only on PrepareForSleep(false) (logind refuses
/// it while the sleep is under way).
final class SleepFollower: Sendable {
    /// What Stats and STATUS= show of it.
    struct Snapshot: Sendable {
        var inhibitorHeld = false
        var delayMax: Duration = SleepFollower.defaultDelayMax
        var lastSleep: Double?
        var lastWake: Double?
        /// How long the last preparation held sleep back.
        var lastPreparation: Duration?
        /// Apps whose acknowledgement of the last sleep's willResignActive did not come in time.
        var lastLate: [String] = []
        var problem: String?
    }

    /// logind's default InhibitDelayMaxSec= (logind.conf(5)), used when the property cannot be read.
    static let defaultDelayMax: Duration = .seconds(5)
    static let login1 = "org.freedesktop.login1"
    static let login1Path = "/org/freedesktop/login1"
    static let login1Manager = "org.freedesktop.login1.Manager"

    /// The inhibitor's handle is its file descriptor.
    typealias Preparation = SleepPreparation<ContinuousClock.Instant, Int32>

    private struct State {
        var preparation = Preparation(delay: SleepFollower.defaultDelayMax)
        var snapshot = Snapshot()
        /// When (wall clock) the sleep being prepared for was announced.
        var announced: Double?
        var subscription: BusSubscription?
    }

    private let bus: BusConnection
    private let apps: AppManager
    private let notifications: NotificationCenter
    private let place: ClockZoneLocaleFollower
    private let logger: Logger
    private let state = Mutex(State())
    private let signals: AsyncStream<Bool>
    private let signalSink: AsyncStream<Bool>.Continuation

    init(bus: BusConnection, apps: AppManager, notifications: NotificationCenter, place: ClockZoneLocaleFollower, logger: Logger) {
        self.bus = bus
        self.apps = apps
        self.notifications = notifications
        self.place = place
        self.logger = logger
        (self.signals, self.signalSink) = AsyncStream.makeStream(of: Bool.self)
    }

    var snapshot: Snapshot {
        self.state.withLock { state in
            var snapshot = state.snapshot
            snapshot.delayMax = state.preparation.delay
            return snapshot
        }
    }

    /// Subscribes to PrepareForSleep, reads the delay logind grants and takes the inhibitor; then handles each
    /// signal in its turn until ``stop()``.
    func run() async {
        do {
            let sink = self.signalSink
            let subscription = try await self.bus.subscribe(
                BusSignalMatch(sender: Self.login1, path: Self.login1Path, interface: Self.login1Manager, member: "PrepareForSleep")
            ) { signal in
                if let start = signal.arguments.first?.boolValue { sink.yield(start) }
            }
            self.state.withLock { $0.subscription = subscription }
        } catch {
            self.fail("Sleep is not followed: \(error)")
            return
        }
        // logind started again, or the bus came back: the inhibitor is taken if none is held, and a wake whose
        // signal was lost meanwhile is caught up with.
        let owner = try? await self.bus.subscribe(
            BusSignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        ) { [weak self] signal in
            guard let self, signal.arguments.first?.stringValue == Self.login1, signal.arguments.last?.stringValue?.isEmpty == false
            else { return }
            Task { await self.recover(after: "logind started") }
        }
        self.bus.onReconnect { [weak self] in
            guard let self else { return }
            Task { await self.recover(after: "the system bus came back") }
        }
        if let delay = try? await self.bus.property(
            destination: Self.login1, path: Self.login1Path, interface: Self.login1Manager, name: "InhibitDelayMaxUSec", timeout: .seconds(5)
        ).uintValue {
            self.state.withLock { $0.preparation.delay = .microseconds(Int64(clamping: delay)) }
        }
        await self.carryOut(self.decide { $0.start() })
        for await start in self.signals {
            if start { await self.prepareForSleep() } else { await self.woke() }
        }
        owner?.cancel()
    }

    /// Ends ``run()`` and lets go of the inhibitor.
    func stop() {
        self.signalSink.finish()
        let (actions, subscription) = self.state.withLock { state in
            state.snapshot.inhibitorHeld = false
            return (state.preparation.stop(), state.subscription)
        }
        subscription?.cancel()
        for case .releaseInhibitor(let fd) in actions { HandedDescriptor.close(fd) }
    }

    /// After logind or the bus came back: a sleep whose PrepareForSleep(false) was lost is ended (in the signals'
    /// order, through their stream), and the inhibitor taken if none is held.
    private func recover(after cause: String) async {
        await self.carryOut(self.decide { $0.start(cause: cause) })
    }

    private func prepareForSleep() async {
        let wall = wallClock()
        let actions = self.decide { preparation, state in
            state.announced = wall
            return preparation.sleepAnnounced(now: .now)
        }
        self.place.willSleep()
        await self.carryOut(actions)
    }

    private func woke() async {
        let wall = wallClock()
        let actions = self.decide { preparation, state in
            state.snapshot.lastWake = wall
            return preparation.wakeAnnounced(now: .now)
        }
        self.place.didWake()
        await self.carryOut(actions)
    }

    /// Feeds the machine under the lock; what it returns is carried out after it.
    private func decide(
        _ input: (inout Preparation, inout State) -> [Preparation.Action]
    ) -> [Preparation.Action] {
        self.state.withLock { state in
            var preparation = state.preparation
            defer { state.preparation = preparation }
            return input(&preparation, &state)
        }
    }

    private func decide(_ input: (inout Preparation) -> [Preparation.Action]) -> [Preparation.Action] {
        self.decide { preparation, _ in input(&preparation) }
    }

    /// Carries out `actions` in order, each one's consequences before the next.
    private func carryOut(_ actions: [Preparation.Action]) async {
        var queue = actions
        while !queue.isEmpty {
            let action = queue.removeFirst()
            queue.insert(contentsOf: await self.perform(action), at: 0)
        }
    }

    /// Carries out one action; returns what the machine decided of its outcome.
    private func perform(_ action: Preparation.Action) async -> [Preparation.Action] {
        switch action {
        case .takeInhibitor(let cause):
            return await self.takeInhibitor(after: cause)
        case .inhibitorHeld(let cause):
            self.state.withLock { state in
                state.snapshot.inhibitorHeld = true
                state.snapshot.problem = nil
            }
            if let cause { self.logger.notice("Took logind's sleep inhibitor again (\(cause))") }
            return []
        case .releaseInhibitor(let fd):
            HandedDescriptor.close(fd)
            return []
        case .interruptApps:
            let told = self.apps.systemWillSleep()
            return self.decide { $0.told(told, now: .now) }
        case .waitForAcknowledgements(let waits, let deadline):
            return await self.waitForAcknowledgements(waits, until: deadline)
        case .flushStore:
            await self.apps.store.flush()
            return self.decide { $0.flushed(now: .now) }
        case .wentToSleep(let report):
            self.wentToSleep(report)
            return []
        case .wakeApps(let interrupted):
            await self.wakeApps(interrupted)
            return []
        case .askPreparingForSleep(let cause):
            let preparing = try? await self.bus.property(
                destination: Self.login1, path: Self.login1Path, interface: Self.login1Manager, name: "PreparingForSleep", timeout: .seconds(5)
            ).boolValue
            return self.decide { $0.preparingForSleep(preparing, cause: cause) }
        case .catchUpWake(let cause):
            self.logger.notice("The wake's signal was lost (\(cause)): the system is awake")
            self.signalSink.yield(false)
            return []
        }
    }

    /// Asks logind for the delay inhibitor.
    private func takeInhibitor(after cause: String?) async -> [Preparation.Action] {
        do {
            let reply = try await self.bus.call(
                destination: Self.login1, path: Self.login1Path, interface: Self.login1Manager, member: "Inhibit",
                arguments: [
                    .string("sleep"), .string("coalesced"),
                    .string("Apps hear that the system goes to sleep, and their events are put on disk"), .string("delay"),
                ],
                timeout: .seconds(10)
            )
            guard case .fileDescriptor(let fd) = reply.first else {
                throw SystemdError(operation: "call \(Self.login1Manager).Inhibit", errno: Errno.EBADMSG)
            }
            return self.decide { $0.inhibitorTaken(fd, cause: cause) }
        } catch {
            self.fail("Cannot take logind's sleep inhibitor: \(error); apps are told of sleep only as it happens")
            return []
        }
    }

    /// Waits for each app's acknowledgement, all at once, until `deadline`.
    private func waitForAcknowledgements(
        _ waits: [(app: AppName, sequence: UInt64)],
        until deadline: ContinuousClock.Instant
    ) async -> [Preparation.Action] {
        let within = max(.zero, ContinuousClock.now.duration(to: deadline))
        var next: [Preparation.Action] = []
        await withTaskGroup(of: (AppName, UInt64, Bool).self) { group in
            for (app, sequence) in waits {
                group.addTask {
                    (app, sequence, await self.apps.waitForAcknowledgement(of: app, sequence: sequence, within: within))
                }
            }
            for await (app, sequence, acknowledged) in group {
                next += self.decide { acknowledged ? $0.acknowledged(app, upTo: sequence) : $0.notAcknowledged(app) }
            }
        }
        return next
    }

    private func wentToSleep(_ report: Preparation.Report) {
        let late = report.late.map(\.value)
        self.state.withLock { state in
            state.snapshot.inhibitorHeld = false
            state.snapshot.lastSleep = state.announced
            state.snapshot.lastPreparation = report.elapsed
            state.snapshot.lastLate = late
        }
        let names = report.told.map(\.value)
        var metadata: Logger.Metadata = [
            "message_id": "\(MessageID.sleep)",
            "apps": "\(names.joined(separator: " "))",
            "preparation_ms": "\(report.elapsed.milliseconds)",
        ]
        if !late.isEmpty {
            metadata["late"] = "\(late.joined(separator: " "))"
            self.logger.warning(
                "Going to sleep: \(late.joined(separator: ", ")) did not acknowledge willResignActive within \(report.budget.seconds) s; sleep goes ahead",
                metadata: metadata
            )
        } else {
            let who = names.isEmpty ? "no app was active" : "\(names.joined(separator: ", ")) told willResignActive"
            self.logger.notice("Going to sleep: \(who); the store is on disk", metadata: metadata)
        }
    }

    /// The wake: the apps the sleep interrupted made active again, the notifications told, the journal's entry.
    private func wakeApps(_ interrupted: [AppName]) async {
        let slept = self.state.withLock { state -> Double? in
            guard let wake = state.snapshot.lastWake else { return nil }
            return state.snapshot.lastSleep.map { wake - $0 }
        }
        let woken = self.apps.systemDidWake(interrupted)
        await self.notifications.resumed()
        let message = "Woke from sleep" + (slept.map { " after \(Self.format($0)) s" } ?? "")
            + (woken.isEmpty ? "" : "; \(woken.map(\.value).joined(separator: ", ")) active again")
        self.logger.notice(
            "\(message)",
            metadata: ["message_id": "\(MessageID.wake)", "apps": "\(woken.map(\.value).joined(separator: " "))"]
        )
    }

    private func fail(_ message: String) {
        self.state.withLock { $0.snapshot.problem = message }
        self.logger.warning("\(message)")
    }

    private static func format(_ seconds: Double) -> String {
        String(Double((seconds * 10).rounded()) / 10)
    }
}

extension Duration {
    var milliseconds: Int64 { self.nanoseconds / 1_000_000 }
}
