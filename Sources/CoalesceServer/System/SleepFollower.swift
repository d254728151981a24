import CoalesceCore
import CoalesceStore
import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

/// logind's sleep, as an iOS device's: a delay inhibitor held while awake; PrepareForSleep(true) interrupts the
/// active app (willResignActive, reason `sleep`), waits for its acknowledgement, puts every pending write on disk,
/// and lets go of the inhibitor within logind's InhibitDelayMaxUSec; PrepareForSleep(false) takes the inhibitor
/// again, makes the interrupted app active (didBecomeActive, reason `wake`) and has the notifications handle what
/// came due meanwhile (``NotificationCenter/resumed()``).
///
/// The steps follow systemd's "Taking Delay Locks" (docs/INHIBITOR_LOCKS.md): the PrepareForSleep match is in place
/// before the inhibitor is asked for, the inhibitor is closed only once the preparation is done, and it is taken
/// again only on PrepareForSleep(false) (logind refuses it while the sleep is under way).
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

    private struct State {
        var inhibitor: Int32 = -1
        var snapshot = Snapshot()
        var sleeping = false
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

    var snapshot: Snapshot { self.state.withLock { $0.snapshot } }

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
            self.state.withLock { $0.snapshot.delayMax = .microseconds(Int64(clamping: delay)) }
        }
        await self.takeInhibitor(after: nil)
        for await start in self.signals {
            if start { await self.prepareForSleep() } else { await self.woke() }
        }
        owner?.cancel()
    }

    /// Ends ``run()`` and lets go of the inhibitor.
    func stop() {
        self.signalSink.finish()
        let (fd, subscription) = self.state.withLock { state in
            defer {
                state.inhibitor = -1
                state.snapshot.inhibitorHeld = false
            }
            return (state.inhibitor, state.subscription)
        }
        subscription?.cancel()
        if fd >= 0 { close(fd) }
    }

    /// After logind or the bus came back: a sleep whose PrepareForSleep(false) was lost is ended (in the signals'
    /// order, through their stream), and the inhibitor taken if none is held.
    private func recover(after cause: String) async {
        if self.state.withLock({ $0.sleeping }) {
            let preparing = try? await self.bus.property(
                destination: Self.login1, path: Self.login1Path, interface: Self.login1Manager, name: "PreparingForSleep", timeout: .seconds(5)
            ).boolValue
            if preparing == false {
                self.logger.notice("The wake's signal was lost (\(cause)): the system is awake")
                self.signalSink.yield(false)
            }
            return
        }
        await self.takeInhibitor(after: cause)
    }

    /// Asks logind for the delay inhibitor, unless one is held or the system is on its way to sleep.
    private func takeInhibitor(after cause: String?) async {
        guard self.state.withLock({ $0.inhibitor < 0 && !$0.sleeping }) else { return }
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
                throw SystemdError(operation: "call \(Self.login1Manager).Inhibit", errno: EBADMSG)
            }
            let kept = self.state.withLock { state -> Bool in
                guard state.inhibitor < 0, !state.sleeping else { return false }
                state.inhibitor = fd
                state.snapshot.inhibitorHeld = true
                state.snapshot.problem = nil
                return true
            }
            if !kept { close(fd) }  // another call took one first, or sleep began meanwhile
            if kept, let cause { self.logger.notice("Took logind's sleep inhibitor again (\(cause))") }
        } catch {
            self.fail("Cannot take logind's sleep inhibitor: \(error); apps are told of sleep only as it happens")
        }
    }

    private func prepareForSleep() async {
        let started = ContinuousClock.now
        let wall = wallClock()
        let (fd, budget) = self.state.withLock { state in
            defer {
                state.sleeping = true
                state.inhibitor = -1
            }
            return (state.inhibitor, state.snapshot.delayMax)
        }
        self.place.willSleep()
        let told = self.apps.systemWillSleep()
        // Three quarters of logind's delay for the apps; the rest for the store's writes and a margin.
        let waitBudget = budget * 3 / 4
        var late: [String] = []
        await withTaskGroup(of: (String, Bool).self) { group in
            for interruption in told where interruption.attached {
                group.addTask {
                    let acknowledged = await self.apps.waitForAcknowledgement(
                        of: interruption.app, sequence: interruption.sequence, within: waitBudget
                    )
                    return (interruption.app.value, acknowledged)
                }
            }
            for await (app, acknowledged) in group where !acknowledged { late.append(app) }
        }
        await self.apps.store.flush()
        if fd >= 0 { close(fd) }
        let elapsed = started.duration(to: .now)
        self.state.withLock { state in
            state.snapshot.inhibitorHeld = false
            state.snapshot.lastSleep = wall
            state.snapshot.lastPreparation = elapsed
            state.snapshot.lastLate = late.sorted()
        }
        let names = told.map(\.app.value)
        var metadata: Logger.Metadata = [
            "message_id": "\(MessageID.sleep)",
            "apps": "\(names.joined(separator: " "))",
            "preparation_ms": "\(elapsed.milliseconds)",
        ]
        if !late.isEmpty {
            metadata["late"] = "\(late.sorted().joined(separator: " "))"
            self.logger.warning(
                "Going to sleep: \(late.sorted().joined(separator: ", ")) did not acknowledge willResignActive within \(waitBudget.seconds) s; sleep goes ahead",
                metadata: metadata
            )
        } else {
            let who = names.isEmpty ? "no app was active" : "\(names.joined(separator: ", ")) told willResignActive"
            self.logger.notice("Going to sleep: \(who); the store is on disk", metadata: metadata)
        }
    }

    private func woke() async {
        let wall = wallClock()
        let slept = self.state.withLock { state -> Double? in
            state.sleeping = false
            state.snapshot.lastWake = wall
            return state.snapshot.lastSleep.map { wall - $0 }
        }
        self.place.didWake()
        await self.takeInhibitor(after: nil)
        let woken = self.apps.systemDidWake()
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
