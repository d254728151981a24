import NIOCore
import ServiceLifecycle
import Systemd

/// Feeds systemd's watchdog (WATCHDOG=1) at half its timeout, and only once every serving event loop has run a
/// task: if any loop hangs, the pings stop and systemd acts. Without `WatchdogSec=` it does nothing.
struct WatchdogService: Service {
    let notifier: SystemdNotifier
    let loops: [any EventLoop]

    func run() async {
        guard let timeout = self.notifier.watchdogTimeout, let first = self.loops.first else {
            try? await gracefulShutdown()  // nothing to feed; returning early would stop the daemon
            return
        }
        while true {
            // A loop that never runs the task keeps this waiting, and the pings stop: that is the point.
            guard (try? await EventLoopFuture.andAllSucceed(self.loops.map { $0.submit {} }, on: first).get()) != nil
            else { return }
            self.notifier.watchdog()
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: timeout / 2) }
            } catch {
                return  // the daemon is stopping
            }
        }
    }
}
