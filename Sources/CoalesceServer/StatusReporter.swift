import NIOConcurrencyHelpers
import Systemd
import Varlink

/// Keeps systemd's STATUS= line current: sent when what it says changes, checked once a second.
final class StatusReporter: Sendable {
    private let notifier: SystemdNotifier
    private let server: VarlinkServer
    private let address: VarlinkListenAddress
    private let lastSent = NIOLockedValueBox<String?>(nil)

    init(notifier: SystemdNotifier, server: VarlinkServer, address: VarlinkListenAddress) {
        self.notifier = notifier
        self.server = server
        self.address = address
    }

    /// The one-line summary `systemctl status` shows.
    func line() -> String {
        let statistics = self.server.statistics.snapshot
        let noun = statistics.connections == 1 ? "connection" : "connections"
        let line = "Serving \(self.address); \(statistics.connections) \(noun), \(statistics.calls) calls"
        self.lastSent.withLockedValue { $0 = line }
        return line
    }

    /// Sends STATUS= if the summary changed since it was last sent.
    func refresh() {
        let previous = self.lastSent.withLockedValue { $0 }
        let current = self.line()
        if current != previous { self.notifier.status(current) }
    }
}
