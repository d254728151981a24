import ServiceLifecycle

/// The system around the apps (sleep, the screen lock, the clock, the zone, the locale) as one of the daemon's
/// services: followed until the daemon stops, when the sleep inhibitor is let go (the bus is closed after every
/// service has stopped).
struct SystemService: Service {
    let system: SystemFollower

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.system.run() }
            try? await gracefulShutdown()
            self.system.stop()
        }
    }
}
