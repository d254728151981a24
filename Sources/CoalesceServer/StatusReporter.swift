import CoalesceCore
import NIOConcurrencyHelpers
import Systemd
import Varlink

/// Keeps systemd's STATUS= line current: sent when what it says changes, checked once a second. It remembers the
/// last line it sent, so a refused reload stays on display until there is something new to say.
final class StatusReporter: Sendable {
    private let notifier: SystemdNotifier
    private let server: VarlinkServer
    private let address: VarlinkListenAddress
    private let apps: AppManager
    private let system: SystemFollower
    private let lastSent = NIOLockedValueBox<String?>(nil)

    init(notifier: SystemdNotifier, server: VarlinkServer, address: VarlinkListenAddress, apps: AppManager, system: SystemFollower) {
        self.notifier = notifier
        self.server = server
        self.address = address
        self.apps = apps
        self.system = system
    }

    /// The one-line summary `systemctl status` shows.
    private func summary() -> String {
        let statistics = self.server.statistics.snapshot
        let noun = statistics.connections == 1 ? "connection" : "connections"
        let states = self.apps.statistics.states
        let apps = states.values.reduce(0, +)
        let running = [AppState.active, .inactive, .background, .suspended].compactMap { state in
            states[state].map { "\($0) \(state.rawValue)" }
        }
        return "Serving \(self.address); \(statistics.connections) \(noun), \(statistics.calls) calls; "
            + "\(apps) \(apps == 1 ? "app" : "apps")" + (running.isEmpty ? "" : " (" + running.joined(separator: ", ") + ")")
            + (self.system.statusSuffix.map { "; " + $0 } ?? "")
    }

    /// READY=1 with the summary: at start-up and after a reload.
    func ready() {
        let line = self.summary()
        self.lastSent.withLockedValue { $0 = line }
        self.notifier.ready(status: line)
    }

    /// READY=1 ending a reload that was refused, saying so.
    func readyAfterRefusedReload(_ reason: String) {
        let line = "Reload failed, old configuration in force: \(reason)"
        self.lastSent.withLockedValue { $0 = line }
        self.notifier.ready(status: line)
    }

    /// Sends STATUS= when the summary differs from the line last sent.
    func refresh() {
        let line = self.summary()
        let changed = self.lastSent.withLockedValue { last in
            defer { last = line }
            return last != line
        }
        if changed { self.notifier.status(line) }
    }
}
