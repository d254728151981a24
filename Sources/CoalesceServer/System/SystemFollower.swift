import CoalesceCore
import Logging
import Systemd
import Varlink

/// The system around the apps, followed as `[System]` says: logind's sleep (``SleepFollower``), the seat's screen
/// lock (``LockFollower``), the clock, the zone and the locale (``ClockZoneLocaleFollower``), over one long-lived connection
/// to the system bus (the user's, for a user instance). Without a bus, sleep, lock and locale are not followed, and
/// the start says so; the clock and the zone still are.
final class SystemFollower: Sendable {
    let place: ClockZoneLocaleFollower
    let sleep: SleepFollower?
    let lock: LockFollower?
    /// What background refreshes may require (power, network, idle).
    let conditions: ConditionsFollower?
    let refreshes: RefreshScheduler
    let bus: BusConnection?
    private let settings: SystemSettings
    private let logger: Logger
    /// Why there is no bus, when there is none.
    let busProblem: String?

    /// - Parameters:
    ///   - bus: the daemon's connection to the bus of `scope`; `nil` when there is none, for `busProblem`.
    init(
        settings: SystemSettings,
        scope: BusConnection.Scope,
        bus: BusConnection?,
        busProblem: String?,
        apps: AppManager,
        notifications: NotificationCenter,
        refreshes: RefreshScheduler,
        logger: Logger
    ) {
        self.refreshes = refreshes
        self.conditions = bus.map { ConditionsFollower(bus: $0, refreshes: refreshes, logger: logger) }
        if self.conditions != nil { refreshes.awaitConditions() }
        self.settings = settings
        self.logger = logger
        let place = ClockZoneLocaleFollower(apps: apps, logger: logger)
        self.place = place
        // A refresh due while the machine slept, or before a clock set, is looked at again at once.
        place.onTimeJump { refreshes.reconsider() }
        self.bus = bus
        self.busProblem = busProblem
        self.sleep = bus.flatMap { bus in
            // Sleep is the system's: a user instance leaves it to the system's daemon.
            settings.followsSleep && scope == .system
                ? SleepFollower(bus: bus, apps: apps, notifications: notifications, place: place, logger: logger) : nil
        }
        self.lock = bus.flatMap { bus in
            settings.lockSeat.map { LockFollower(bus: bus, seat: $0, apps: apps, logger: logger) }
        }
        notifications.followChanges(watchZone: settings.followsTimeZone) { event, zone in
            switch event {
            case .clockChanged: place.clockChanged()
            case .timeZoneChanged where settings.followsTimeZone: place.timeZoneChanged(to: zone)
            case .timeZoneChanged, .expired: break
            }
        }
    }

    /// Follows the system until ``stop()``.
    func run() async {
        self.place.start()
        if let busProblem, self.settings.followsSleep || self.settings.followsLock || self.settings.followsLocale {
            self.logger.warning("No bus (\(busProblem)): sleep, the screen lock and the locale are not followed, and launch units cannot be started")
        }
        if let bus, self.settings.followsLocale { await self.place.followLocale(on: bus) }
        await withTaskGroup(of: Void.self) { group in
            if let sleep = self.sleep { group.addTask { await sleep.run() } }
            if let lock = self.lock { group.addTask { await lock.run() } }
            if let conditions = self.conditions {
                // Its first reading decides what is due: a refresh waiting for the network does not run at start
                // before the daemon knows whether there is one.
                group.addTask { await conditions.run() }
            } else {
                group.addTask { self.refreshes.reconsider() }
            }
        }
    }

    /// Stops following: the sleep inhibitor is let go, the matches removed. The bus stays open for the services
    /// stopped after this one (a wake during the stop still thaws its app's unit): ``closeBus()`` ends it.
    func stop() {
        self.sleep?.stop()
        self.lock?.stop()
        self.conditions?.stop()
        self.refreshes.stop()
        self.place.stop()
    }

    /// Closes the bus, once every service has stopped.
    func closeBus() {
        self.bus?.close()
    }

    /// What Stats shows under `system`.
    var statistics: JSONObject {
        var system: JSONObject = [:]
        if let sleep = self.sleep?.snapshot {
            system["sleep"] = [
                "inhibitorHeld": .bool(sleep.inhibitorHeld),
                "inhibitDelayMaxSec": .double(sleep.delayMax.seconds),
                "lastSleep": sleep.lastSleep.map(JSONValue.double) ?? .null,
                "lastWake": sleep.lastWake.map(JSONValue.double) ?? .null,
                "lastPreparationSec": sleep.lastPreparation.map { .double($0.seconds) } ?? .null,
                "lastLate": .array(sleep.lastLate.map(JSONValue.string)),
                "problem": sleep.problem.map(JSONValue.string) ?? .null,
            ]
        } else {
            system["sleep"] = .null
        }
        if let lock = self.lock?.snapshot {
            system["lock"] = [
                "seat": .string(lock.seat),
                "session": lock.session.map(JSONValue.string) ?? .null,
                "locked": .bool(lock.locked),
                "problem": lock.problem.map(JSONValue.string) ?? .null,
            ]
        } else {
            system["lock"] = .null
        }
        let place = self.place.snapshot
        system["clockChanges"] = .int(Int64(place.clockChanges))
        system["timeZone"] = place.timeZone.map(JSONValue.string) ?? .null
        system["locale"] = place.locale.map { .array($0.map(JSONValue.string)) } ?? .null
        let conditions = self.refreshes.conditions
        system["refreshConditions"] = .object(
            JSONObject(RefreshCondition.allCases.map { ($0.rawValue, conditions.known[$0].map(JSONValue.bool) ?? .null) })
        )
        system["bus"] = self.bus == nil ? .string(self.busProblem ?? "not used") : .string("connected")
        return system
    }

    /// STATUS='s words on sleep: when the system last slept and woke.
    var statusSuffix: String? {
        guard let sleep = self.sleep?.snapshot, let lastSleep = sleep.lastSleep else { return nil }
        let slept = "slept \(Self.time(lastSleep))"
        guard let wake = sleep.lastWake, wake >= lastSleep else { return slept }
        return slept + ", woke \(Self.time(wake))"
    }

    private static func time(_ seconds: Double) -> String {
        LocalDateTime(localSeconds: Int64(seconds.rounded(.down))).isoText + "Z"
    }
}
