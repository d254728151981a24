import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Systemd
import UnixSignals
import Varlink
import CoalesceStore
public import CoalesceWire

#if canImport(Glibc)
import Glibc
#endif

/// Journal MESSAGE_IDs of the entries an operator acts on; `systemd/coalesced.catalog` explains each.
public enum MessageID {
    public static let started = "d2415ccfc6e24ad782ec5497e5865f79"
    public static let stopping = "8df312b557454b32bedd5d08e8f73c12"
    public static let reloaded = "6ab1dea5eea941e2a65c779e0a3dcd9b"
    public static let reloadFailed = "c398ef5e1e3547eb8e9b1e6b98eda402"
    public static let startFailed = "396691b1f9ab41ed8e993c2c06b4dee4"
    /// An app changed state (COALESCED_APP, COALESCED_FROM, COALESCED_TO, COALESCED_REASON).
    public static let transition = "2a906d1513cc406fa724cbb88e6640e3"
    /// An app was killed because it did not acknowledge a callback in time.
    public static let deadlineMissed = "0901a4f79c6c478abfa8b3ef190e586e"
    /// An app's background budget ran out: its tasks were ended, and it was suspended or terminated.
    public static let tasksExpired = "059f6d6acebb4d669dc1dc022ce84085"
    /// A suspended app was killed to reclaim memory.
    public static let purged = "f54cf9d32843419fade869b06484eabf"
    /// An app was told its background task is about to expire.
    public static let taskExpiring = "65e264e9f2834ccaafdeafb1389e934b"
    /// A launched app did not attach in time.
    public static let launchTimedOut = "be02aa835cf24b2bbd9b0e7fdb0fb046"
    /// A terminated app ignored SIGTERM and was killed.
    public static let killedAfterGrace = "2ed7d301c32947ccbdd534b801432449"

    /// Every MESSAGE_ID, for checking the catalog.
    public static let all = [
        started, stopping, reloaded, reloadFailed, startFailed, transition, deadlineMissed, tasksExpired, purged,
        taskExpiring, launchTimedOut, killedAfterGrace,
    ]
}

/// What the command line decided.
public struct DaemonOptions: Sendable {
    public var instance: DaemonInstance
    public var socketPath: String
    public var stateDirectory: String
    public var configPath: String
    /// Whether the configuration file must exist (it was named explicitly).
    public var configRequired: Bool

    public init(
        instance: DaemonInstance,
        socketPath: String,
        stateDirectory: String,
        configPath: String,
        configRequired: Bool
    ) {
        self.instance = instance
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.configPath = configPath
        self.configRequired = configRequired
    }
}

/// Exit statuses, from sysexits(3) where one fits, so `RestartPreventExitStatus=` can tell a configuration error
/// (restarting will not help) from a crash.
public enum DaemonExit {
    public static let success: Int32 = 0
    public static let failure: Int32 = 1
    public static let configuration: Int32 = 78
    public static let cannotCreate: Int32 = 73
}

/// The daemon from start-up to exit.
public enum Daemon {
    /// Runs until SIGTERM or SIGINT and returns the exit status.
    public static func run(options: DaemonOptions) async -> Int32 {
        let configuration: Configuration
        do {
            configuration = try ConfigurationLoader.load(path: options.configPath, required: options.configRequired)
        } catch {
            printError("\(error); fix the configuration and start again")
            return DaemonExit.configuration
        }
        raiseDescriptorLimit()
        let levelControl = LogLevelControl(configuration.logLevel)
        DaemonLogging.bootstrap(identifier: "coalesced", control: levelControl)
        let logger = Logger(label: "coalesced")

        // From here on failures are logged: as one readable line on a terminal, as an entry under systemd.
        if let failure = createDirectory(options.stateDirectory, mode: 0o700) {
            logger.critical(
                "Cannot create the state directory; pass --state-dir or fix permissions",
                metadata: ["path": "\(options.stateDirectory)", "reason": "\(failure)", "message_id": "\(MessageID.startFailed)"]
            )
            return DaemonExit.cannotCreate
        }

        let address: VarlinkListenAddress
        do {
            address = try listenAddress(options: options)
        } catch {
            logger.critical(
                "Cannot use the sockets passed by systemd",
                metadata: ["reason": "\(error)", "message_id": "\(MessageID.startFailed)"]
            )
            return DaemonExit.failure
        }

        if case .path(let path) = address, let slash = path.lastIndex(of: "/"), slash != path.startIndex,
            let failure = createDirectory(String(path[..<slash]), mode: 0o755)
        {
            logger.critical(
                "Cannot create the socket's directory; pass --socket or fix permissions",
                metadata: ["reason": "\(failure)", "message_id": "\(MessageID.startFailed)"]
            )
            return DaemonExit.cannotCreate
        }

        // With more than one loop, connections are spread over them, so that many clients' calls are parsed and
        // decided on several cores (an app's state is kept under a lock, and each stream's writes go through its
        // own loop's queue, in the order they were decided).
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoops)
        let state = DaemonState(configuration: configuration)
        let busScope: SystemBus.Scope = options.instance == .system ? .system : .user
        let apps: AppManager
        do {
            // Everything accepted before is recovered before READY=1; a large store may take a while.
            SystemdNotifier().extendTimeout(by: .seconds(90), status: "Recovering the store in \(options.stateDirectory)")
            // A commit's answers wake each connection once, after the last of them.
            let store = try Store(stateDirectory: options.stateDirectory) { finish in VarlinkAnswerGathering.gather(finish) }
            try await importRegistryFile(stateDirectory: options.stateDirectory, into: store, logger: logger)
            apps = try AppManager(
                store: store,
                daemon: state,
                eventLoop: group.next(),
                logger: logger,
                startUnit: { unit in try startUnit(unit, on: busScope) }
            )
        } catch {
            logger.critical(
                "Cannot open the store",
                metadata: ["reason": "\(error)", "message_id": "\(MessageID.startFailed)"]
            )
            try? await group.shutdownGracefully()  // exiting anyway
            return DaemonExit.failure
        }
        let statistics = VarlinkServerStatistics()
        let service = VarlinkService(
            info: VarlinkServiceInfo(
                vendor: "coalesced",
                product: "coalesced",
                version: CoalescedVersion.string,
                url: "https://github.com/coalesced/coalesced"
            ),
            interfaces: [
                SystemInterface.make(daemon: state, statistics: statistics, apps: apps),
                AppInterface.make(apps: apps, daemon: state),
                ProtocolInterface.make(),
            ],
            protocolErrorInterface: ProtocolInterface.name
        )
        let server = VarlinkServer(
            service: service,
            limits: limits(configuration),
            statistics: statistics,
            group: group,
            logger: logger
        )

        do {
            // The system instance serves apps of every user and decides per call, from the peer's credentials, who
            // may do what; a user instance is its user's alone, as the user unit's SocketMode=0600 makes it.
            try await server.start(address, socketMode: options.instance == .system ? 0o666 : 0o600)
        } catch {
            logger.critical(
                "Cannot serve the socket",
                metadata: ["socket": "\(address)", "reason": "\(error)", "message_id": "\(MessageID.startFailed)"]
            )
            await server.shutdown()
            try? await group.shutdownGracefully()  // exiting anyway; nothing is left to report a failure to
            return DaemonExit.failure
        }

        let notifier = SystemdNotifier()
        let status = StatusReporter(notifier: notifier, server: server, address: address, apps: apps)
        let eventLoop = group.next()
        // The watchdog is fed only once every serving loop has run a task: if any loop hangs, the pings stop and
        // systemd acts.
        let loops = Array(group.makeIterator())
        let watchdogTask = notifier.watchdogTimeout.map { timeout in
            eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .nanoseconds(timeout.nanoseconds / 2)) { _ in
                EventLoopFuture.andAllSucceed(loops.map { $0.submit {} }, on: eventLoop).whenSuccess { notifier.watchdog() }
            }
        }
        let statusTask = eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            status.refresh()
        }
        let reloader = Reloader(
            options: options,
            state: state,
            apps: apps,
            server: server,
            levelControl: levelControl,
            notifier: notifier,
            status: status,
            logger: logger,
            announceReady: {
                // Only now are SIGTERM and SIGHUP handled: a manager that acts on READY=1 at once must not kill us.
                status.ready()
                logger.notice(
                    "Serving",
                    metadata: [
                        "socket": "\(address)", "instance": "\(options.instance.rawValue)",
                        "version": "\(CoalescedVersion.string)", "message_id": "\(MessageID.started)",
                    ]
                )
            }
        )
        var groupConfiguration = ServiceGroupConfiguration(
            services: [
                .init(service: reloader, successTerminationBehavior: .gracefullyShutdownGroup)
            ],
            logger: logger
        )
        groupConfiguration.gracefulShutdownSignals = [.sigterm, .sigint]
        let serviceGroup = ServiceGroup(configuration: groupConfiguration)
        var exitStatus = DaemonExit.success
        do {
            try await serviceGroup.run()
        } catch {
            logger.error("Service group failed", metadata: ["error": "\(error)"])
            exitStatus = DaemonExit.failure
        }

        notifier.stopping(status: "Shutting down")
        logger.notice("Stopping", metadata: ["message_id": "\(MessageID.stopping)"])
        watchdogTask?.cancel()
        statusTask.cancel()
        await server.shutdown()
        // Acknowledgements still waiting for company go to disk now, so that those events do not come again.
        await apps.store.flush()
        try? await group.shutdownGracefully()  // exiting anyway; nothing is left to report a failure to
        return exitStatus
    }

    static func limits(_ configuration: Configuration) -> VarlinkServerLimits {
        VarlinkServerLimits(
            maximumMessageSize: configuration.maxMessageSize,
            maximumConnections: configuration.maxConnections
        )
    }

    private static func listenAddress(options: DaemonOptions) throws -> VarlinkListenAddress {
        let sockets = try ListenFDs.take()
        guard !sockets.isEmpty else { return .path(options.socketPath) }
        // One socket is expected; when several are passed, the one named io.coalesced (FileDescriptorName=) wins.
        let chosen = sockets.first { $0.name == "io.coalesced" } ?? sockets[0]
        for unused in sockets where unused.descriptor != chosen.descriptor {
            close(unused.descriptor)
        }
        return .descriptor(chosen.descriptor, path: chosen.path)
    }
}

/// Imports `apps.json`, the registry of versions before the store, once: into the store in one transaction, then
/// renamed to `apps.json.imported`.
func importRegistryFile(stateDirectory: String, into store: Store, logger: Logger) async throws {
    let file = AppRegistryFile(stateDirectory: stateDirectory)
    guard file.exists else { return }
    let registrations = try file.load()
    try await store.save(all: registrations)
    try file.markImported()
    logger.notice(
        "Imported the app registry into the store",
        metadata: ["apps": "\(registrations.count)", "from": "\(file.path)", "store": "\(store.path)"]
    )
}

/// Asks systemd to start a unit (StartUnit, mode "replace") and returns once the job is queued; the app it starts
/// then attaches on its own.
func startUnit(_ unit: String, on scope: SystemBus.Scope) throws(SystemdError) {
    let bus = try SystemBus(scope)
    _ = try bus.callReturningString(
        destination: "org.freedesktop.systemd1",
        path: "/org/freedesktop/systemd1",
        interface: "org.freedesktop.systemd1.Manager",
        member: "StartUnit",
        arguments: [unit, "replace"],
        replyType: "o"
    )
}

/// Every connection and every attached app holds a descriptor; the soft limit (often 1,024) is lifted to the hard
/// limit, as systemd's own daemons do, so that MaxConnections= is what bounds them.
func raiseDescriptorLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)  // the old limit stays if this fails
}

/// Writes one line to stderr: for problems the person starting the daemon must see before logging is set up.
func printError(_ message: String) {
    let line = "coalesced: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

/// Creates a directory, and its missing parents with mode 0755, giving the directory itself `mode` when it creates
/// it; an existing directory keeps the mode it has. `nil` on success, the reason otherwise.
func createDirectory(_ path: String, mode: mode_t) -> String? {
    var prefix = path.hasPrefix("/") ? "" : "."
    let components = path.split(separator: "/")
    for (index, component) in components.enumerated() {
        prefix += "/" + component
        let isLast = index == components.count - 1
        if mkdir(prefix, isLast ? mode : 0o755) != 0, errno != EEXIST {
            return "\(prefix): \(String(cString: strerror(errno)))"
        }
    }
    return nil
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
