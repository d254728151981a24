import ServiceLifecycle

/// The journal watches as one of the daemon's services: the reader starts with the services and stops before the
/// apps' manager does, so that no post is made while the daemon stops.
struct JournalService: Service {
    let watches: JournalWatches

    func run() async {
        self.watches.start()
        try? await gracefulShutdown()
        self.watches.stop()
    }
}
