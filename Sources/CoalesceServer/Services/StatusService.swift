import Logging
import ServiceLifecycle
import Systemd

/// Keeps STATUS= current (checked once a second), and says STOPPING=1 as soon as the daemon begins to stop: it
/// stops right after the reloader, before the server closes its connections.
struct StatusService: Service {
    let status: StatusReporter
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async {
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
            } catch {
                break  // the daemon is stopping
            }
            self.status.refresh()
        }
        self.notifier.stopping(status: "Shutting down")
        self.logger.notice("Stopping", metadata: ["message_id": "\(MessageID.stopping)"])
    }
}
