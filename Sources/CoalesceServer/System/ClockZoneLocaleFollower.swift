import CoalesceCore
import Logging
import Synchronization
import Systemd
import Varlink

/// The clock and the place: a setting of the wall clock, local midnight and a change of the zone's offset (daylight
/// saving time; ``DayBoundaryWatch``) become `lifecycle.significantTimeChange`, as on iOS, a new time zone
/// `system.timeZoneChanged`, a new locale (localed's PropertiesChanged) `system.localeChanged`. Running apps get
/// them at once; a suspended app holds the latest of each kind and gets it on its wake.
///
/// The clock and the zone are reported by the notification timers (``AlertTimer``: its `TFD_TIMER_CANCEL_ON_SET`
/// timerfd and its watch of /etc/localtime), which call ``clockChanged()`` and ``timeZoneChanged(to:)``.
final class ClockZoneLocaleFollower: Sendable {
    static let significantTimeChange = EventKind(daemonKind: "lifecycle.significantTimeChange")
    static let timeZoneChanged = EventKind(daemonKind: "system.timeZoneChanged")
    static let localeChanged = EventKind(daemonKind: "system.localeChanged")
    static let locale1 = "org.freedesktop.locale1"
    static let locale1Path = "/org/freedesktop/locale1"

    /// What Stats shows of it.
    struct Snapshot: Sendable {
        var clockChanges = 0
        var timeZone: String?
        var locale: [String]?
        var localeFollowed = false
    }

    private struct State {
        var filter = ClockChangeFilter<ContinuousClock.Instant>()
        var snapshot = Snapshot()
        var subscription: BusSubscription?
    }

    private let apps: AppManager
    private let logger: Logger
    private let state = Mutex(State())
    private let dayBoundaries: DayBoundaryWatch
    /// Told when time jumped (a wake from sleep, the wall clock set): timers on the monotonic clock, which stands still
    /// while the machine sleeps, are read again (``onTimeJump(_:)``).
    private let timeJumps = Mutex<[@Sendable () -> Void]>([])

    init(apps: AppManager, logger: Logger, zone: @escaping @Sendable () -> ZoneRules = { ZoneDatabase().local() }) {
        self.apps = apps
        self.logger = logger
        let told = Told(apps: apps, logger: logger)
        self.dayBoundaries = DayBoundaryWatch(zone: zone, wallSeconds: wallClock) { boundary in told.dayBoundary(boundary) }
    }

    /// Starts waiting for the day's boundaries.
    func start() {
        self.dayBoundaries.rearm()
    }

    /// What a boundary tells the running apps.
    private struct Told: Sendable {
        let apps: AppManager
        let logger: Logger

        func dayBoundary(_ boundary: DayBoundary) {
            let count = self.apps.postToRunningApps(
                kind: ClockZoneLocaleFollower.significantTimeChange,
                payload: ["time": .double(Double(boundary.seconds)), "reason": .string(boundary.kind.rawValue)], policy: .latest
            )
            let what = boundary.kind == .midnight ? "A new day began" : "The time zone's offset changed"
            self.logger.notice(
                "\(what): \(count) running \(count == 1 ? "app" : "apps") told significantTimeChange",
                metadata: [
                    "message_id": "\(MessageID.timeChanged)", "kind": "\(ClockZoneLocaleFollower.significantTimeChange)",
                    "reason": "\(boundary.kind.rawValue)",
                ]
            )
        }
    }

    var snapshot: Snapshot { self.state.withLock { $0.snapshot } }

    func willSleep() {
        self.state.withLock { $0.filter.willSleep(now: .now) }
    }

    func didWake() {
        self.state.withLock { $0.filter.didWake(now: .now) }
        self.dayBoundaries.rearm()
        for told in self.timeJumps.withLock({ $0 }) { told() }
    }

    /// Calls `told` at each wake from sleep and each setting of the wall clock.
    func onTimeJump(_ told: @escaping @Sendable () -> Void) {
        self.timeJumps.withLock { $0.append(told) }
    }

    /// The wall clock was set (or the kernel reported a resume as one, which ``ClockChangeFilter`` leaves out).
    func clockChanged() {
        let news = self.state.withLock { state -> Bool in
            let news = state.filter.clockChanged(now: .now)
            if news { state.snapshot.clockChanges += 1 }
            return news
        }
        self.dayBoundaries.rearm()
        for told in self.timeJumps.withLock({ $0 }) { told() }
        guard news else { return }
        let now = wallClock()
        let count = self.apps.postToRunningApps(
            kind: Self.significantTimeChange, payload: ["time": .double(now), "reason": "clockSet"], policy: .latest
        )
        self.logger.notice(
            "The wall clock was set: \(count) running \(count == 1 ? "app" : "apps") told significantTimeChange",
            metadata: ["message_id": "\(MessageID.timeChanged)", "kind": "\(Self.significantTimeChange)"]
        )
    }

    func timeZoneChanged(to zone: String) {
        self.state.withLock { $0.snapshot.timeZone = zone }
        self.dayBoundaries.rearm()
        let count = self.apps.postToRunningApps(kind: Self.timeZoneChanged, payload: ["timeZone": .string(zone)], policy: .latest)
        self.logger.notice(
            "The time zone is \(zone): \(count) running \(count == 1 ? "app" : "apps") told",
            metadata: ["message_id": "\(MessageID.timeChanged)", "kind": "\(Self.timeZoneChanged)", "zone": "\(zone)"]
        )
    }

    /// Follows localed's Locale property on `bus`.
    func followLocale(on bus: BusConnection) async {
        do {
            let subscription = try await bus.subscribe(.propertiesChanged(sender: Self.locale1, path: Self.locale1Path)) { [weak self] signal in
                guard let self, signal.arguments.first?.stringValue == Self.locale1 else { return }
                let changed = signal.arguments.count > 1 ? signal.arguments[1].dictionaryValue ?? [:] : [:]
                let invalidated = signal.arguments.count > 2 ? signal.arguments[2].stringsValue ?? [] : []
                if let locale = changed["Locale"]?.stringsValue {
                    self.localeChanged(to: locale)
                } else if invalidated.contains("Locale") {
                    Task {
                        if let locale = try? await bus.property(
                            destination: Self.locale1, path: Self.locale1Path, interface: Self.locale1, name: "Locale", timeout: .seconds(5)
                        ).stringsValue {
                            self.localeChanged(to: locale)
                        }
                    }
                }
            }
            self.state.withLock { state in
                state.subscription = subscription
                state.snapshot.localeFollowed = true
            }
        } catch {
            self.logger.warning("Locale changes are not followed: \(error)")
        }
    }

    func stop() {
        self.dayBoundaries.stop()
        self.state.withLock { $0.subscription }?.cancel()
    }

    private func localeChanged(to locale: [String]) {
        self.state.withLock { $0.snapshot.locale = locale }
        let count = self.apps.postToRunningApps(
            kind: Self.localeChanged, payload: ["locale": .array(locale.map { .string($0) })], policy: .latest
        )
        self.logger.notice(
            "The locale is \(locale.joined(separator: " ")): \(count) running \(count == 1 ? "app" : "apps") told",
            metadata: ["message_id": "\(MessageID.localeChanged)", "kind": "\(Self.localeChanged)"]
        )
    }
}
