import Logging
import ServiceLifecycle
import Systemd
import UnixSignals
import Varlink

/// Reloads the configuration on SIGHUP, telling systemd RELOADING=1 then READY=1 around it. A configuration
/// with errors is refused as a whole and the one in force stays.
struct Reloader: Service {
    let options: DaemonOptions
    let state: DaemonState
    let apps: AppManager
    let journal: JournalWatches
    let server: VarlinkServer
    let levelControl: LogLevelControl
    let notifier: SystemdNotifier
    let status: StatusReporter
    let logger: Logger
    /// Called once SIGHUP is trapped; the service group trapped SIGTERM before starting this service.
    let announceReady: @Sendable () -> Void

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        self.announceReady()
        for await _ in hangups.cancelOnGracefulShutdown() {
            self.reload()
        }
    }

    func reload() {
        self.notifier.reloading()
        do {
            let configuration = try self.options.loadConfiguration()
            if configuration.eventLoops != self.state.configuration.eventLoops {
                self.logger.notice(
                    "EventLoops= takes effect at the next start",
                    metadata: ["running": "\(self.state.configuration.eventLoops)", "configured": "\(configuration.eventLoops)"]
                )
            }
            let journal = configuration.journal
            let running = self.state.configuration.journal
            if journal.follows != running.follows || journal.interval != running.interval || journal.queueBurst != running.queueBurst {
                self.logger.notice(
                    "[Journal] Follow=, BatchIntervalSec= and QueueBurst= take effect at the next start (the watches themselves are reloaded)",
                    metadata: ["config": "\(self.options.configPath)"]
                )
            }
            if configuration.memory != self.state.configuration.memory {
                self.logger.notice("[Memory] takes effect at the next start", metadata: ["config": "\(self.options.configPath)"])
            }
            if let problem = self.journal.problem(with: configuration.journal) {
                throw ConfigurationError(path: self.options.configPath, line: 0, reason: problem)
            }
            self.levelControl.current = configuration.logLevel
            self.state.reloaded(configuration)
            self.server.limits = self.state.serverLimits
            self.state.checkConnectionBudget(logger: self.logger)
            self.apps.timingsChanged(configuration.timings)
            self.apps.quotasChanged(configuration.quotas)
            self.journal.reload(configuration.journal)
            self.logger.notice(
                "Configuration reloaded",
                metadata: ["config": "\(self.options.configPath)", "message_id": "\(MessageID.reloaded)"]
            )
            self.status.ready()
        } catch {
            self.state.reloadFailed()
            self.logger.error(
                "Configuration reload failed, keeping the configuration in force",
                metadata: ["reason": "\(error)", "message_id": "\(MessageID.reloadFailed)"]
            )
            self.status.readyAfterRefusedReload("\(error)")
        }
    }
}
