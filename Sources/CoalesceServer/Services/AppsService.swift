import ServiceLifecycle

/// The apps as one of the daemon's services. It stops right before the server closes its connections, and tells
/// the apps' manager the daemon is stopping: the streams that close then were closed by the daemon, and the apps
/// whose processes run on keep their states for the next start, as after a crash.
struct AppsService: Service {
    let apps: AppManager

    func run() async {
        try? await gracefulShutdown()
        self.apps.daemonStopping()
    }
}
