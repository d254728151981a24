import ServiceLifecycle

/// Local notifications as one of the daemon's services: at a stop their timers stop and the presentation agents'
/// streams end; the requests stay in the store for the next start.
struct NotificationsService: Service {
    let center: NotificationCenter

    func run() async {
        try? await gracefulShutdown()
        self.center.stop()
    }
}
