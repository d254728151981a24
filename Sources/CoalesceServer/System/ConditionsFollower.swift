import CoalesceCore
import Logging
import Synchronization
import Systemd

/// What the system says of the conditions background refreshes may require, read over the daemon's bus and read
/// again at each PropertiesChanged of the objects that tell: logind's `OnExternalPower` and `IdleHint` (acPower,
/// idle), UPower's `OnBattery` (notOnBattery), NetworkManager's `Connectivity` (network: full, 4), or where it does
/// not run systemd-networkd's `OperationalState` (network: routable). A service not on
/// the bus leaves its condition unknown, which counts as holding (``SystemConditions``). The
/// ``RefreshScheduler`` hears each change.
final class ConditionsFollower: Sendable {
    /// One source: who tells, where, and what its value means.
    struct Source: Sendable {
        var condition: RefreshCondition
        var destination: String
        var path: String
        var interface: String
        var property: String
        var holds: @Sendable (BusValue) -> Bool?
    }

    static let sources: [Source] = [
        Source(
            condition: .acPower, destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
            interface: "org.freedesktop.login1.Manager", property: "OnExternalPower", holds: { $0.boolValue }
        ),
        Source(
            condition: .idle, destination: "org.freedesktop.login1", path: "/org/freedesktop/login1",
            interface: "org.freedesktop.login1.Manager", property: "IdleHint", holds: { $0.boolValue }
        ),
        Source(
            condition: .notOnBattery, destination: "org.freedesktop.UPower", path: "/org/freedesktop/UPower",
            interface: "org.freedesktop.UPower", property: "OnBattery", holds: { $0.boolValue.map { !$0 } }
        ),
        Source(
            condition: .network, destination: "org.freedesktop.NetworkManager", path: "/org/freedesktop/NetworkManager",
            interface: "org.freedesktop.NetworkManager", property: "Connectivity", holds: { $0.uintValue.map { $0 == 4 } }
        ),
        // Where NetworkManager does not run: systemd-networkd's view of the links.
        Source(
            condition: .network, destination: "org.freedesktop.network1", path: "/org/freedesktop/network1",
            interface: "org.freedesktop.network1.Manager", property: "OperationalState",
            holds: { $0.stringValue.map { $0 == "routable" } }
        ),
    ]

    /// How often the conditions are read again besides their signals.
    static let pollInterval = Duration.seconds(60)

    private let bus: BusConnection
    private let refreshes: RefreshScheduler
    private let logger: Logger
    private let subscriptions = Mutex<[BusSubscription]>([])
    private let changes: AsyncStream<Void>
    private let changeSink: AsyncStream<Void>.Continuation

    init(bus: BusConnection, refreshes: RefreshScheduler, logger: Logger) {
        self.bus = bus
        self.refreshes = refreshes
        self.logger = logger
        (self.changes, self.changeSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func run() async {
        let sink = self.changeSink
        var objects: [(destination: String, path: String)] = []
        for source in Self.sources where !objects.contains(where: { $0.destination == source.destination && $0.path == source.path }) {
            objects.append((source.destination, source.path))
        }
        for (destination, path) in objects {
            do {
                let subscription = try await self.bus.subscribe(.propertiesChanged(sender: destination, path: path)) { _ in sink.yield() }
                self.subscriptions.withLock { $0.append(subscription) }
            } catch {
                self.logger.warning("Changes of \(path) are not followed for background refreshes: \(error)")
            }
        }
        // A service that starts later (UPower, NetworkManager) shows up as its name gets an owner.
        do {
            let owners = try await self.bus.subscribe(
                BusSignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
            ) { signal in
                if let name = signal.arguments.first?.stringValue, Self.sources.contains(where: { $0.destination == name }) { sink.yield() }
            }
            self.subscriptions.withLock { $0.append(owners) }
        } catch {
            self.logger.warning("Services coming and going are not followed for background refreshes: \(error)")
        }
        self.bus.onReconnect { sink.yield() }
        sink.yield()
        // logind announces no change of OnExternalPower: every condition is read again now and then as well.
        let poll = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.pollInterval)
                sink.yield()
            }
        }
        defer { poll.cancel() }
        for await _ in self.changes {
            await self.read()
        }
    }

    func stop() {
        for subscription in self.subscriptions.withLock({ $0 }) { subscription.cancel() }
        self.changeSink.finish()
    }

    /// Reads every source; one that cannot be read (its service is not there) is unknown. Of two sources of one
    /// condition, the first that answers tells.
    private func read() async {
        var known: [RefreshCondition: Bool] = [:]
        for source in Self.sources where known[source.condition] == nil {
            guard
                let value = try? await self.bus.property(
                    destination: source.destination, path: source.path, interface: source.interface, name: source.property,
                    timeout: .seconds(5)
                ),
                let holds = source.holds(value)
            else { continue }
            known[source.condition] = holds
        }
        let conditions = SystemConditions(known)
        if conditions != self.refreshes.conditions {
            self.logger.info(
                "Conditions for background refreshes: \(RefreshCondition.allCases.map { "\($0.rawValue)=\(known[$0].map { $0 ? "yes" : "no" } ?? "unknown")" }.joined(separator: " "))"
            )
        }
        self.refreshes.conditionsChanged(conditions)
    }
}
