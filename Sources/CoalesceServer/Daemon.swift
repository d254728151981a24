import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Systemd
import UnixSignals
import Varlink
import CoalesceStore
public import CoalesceWire

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
    /// An app's launches failed FailedLaunchLimit= times in a row (COALESCED_APP, COALESCED_FAILED): the daemon no
    /// longer launches it by itself until an operator launches it.
    public static let launchesHeld = "000db9d9448346e6adb8bec273452f3c"
    /// A URL was opened with an app (COALESCED_APP, COALESCED_URL_SCHEME, COALESCED_UID).
    public static let urlOpened = "35bffde9fc784923a0e5555e4ae1dd5b"

    /// A notification was presented (COALESCED_APP, COALESCED_NOTIFICATION, COALESCED_THREAD, COALESCED_TITLE, …).
    public static let notificationPresented = "676e507e53544eda89245077d7bec2ea"
    /// Missed fires of a notification request were dropped by its late policy.
    public static let notificationDropped = "c672dfe6e1f44d8087d6b91c33e8b020"
    /// A notification was answered (Respond).
    public static let notificationAnswered = "a9bea36de025434086cd2c6f4fc52120"
    /// The apps of one user passed the presentation rate (COALESCED_UID, COALESCED_APP, COALESCED_BURST,
    /// COALESCED_INTERVAL): further presentations are coalesced per thread until it is kept again. Once per stretch.
    public static let notificationsCoalesced = "605fd5fec1d241b7b6c0739ac9fde340"

    /// The system goes to sleep: which apps were told, and whether they acknowledged in time.
    public static let sleep = "58a0ba871fb04ef9a44b5766ccd7da89"
    /// The system woke from sleep.
    public static let wake = "f771fdfbbc4c4558a8ac2b6fad83658e"
    /// The wall clock was set or the time zone changed, and running apps were told.
    public static let timeChanged = "6fd9924c5f914d61aec4c965a3174068"
    /// The locale changed, and running apps were told.
    public static let localeChanged = "c13aabaff19e47a8a4ede1c4a93ad1ef"
    /// The seat's screen was locked or unlocked, and running apps were told.
    public static let lockChanged = "b8a27dfd229b4272b6e884b7ec4e0975"
    /// The journal entry at a watch's read position is gone: reading goes on from the closest entry after it.
    public static let journalPositionLost = "f3252ac6e7c34a55bb6a24bd855aee14"
    /// What an app holds could not be read back from the store at start: it was set aside, and the daemon started.
    public static let heldDataSetAside = "561c8856c781489094ec9e0b515fe4c1"
    /// A journal entry could not be tested against a watch's pattern within PCRE2's limits (COALESCED_WATCH,
    /// COALESCED_REASON, COALESCED_UNTESTED): it was not taken. Once a minute at most per watch.
    public static let journalEntryUntested = "36a580d88a5e49a08d17d8e405c3cdc9"

    /// Every MESSAGE_ID, for checking the catalog.
    public static let all = [
        started, stopping, reloaded, reloadFailed, startFailed, transition, deadlineMissed, tasksExpired, purged,
        taskExpiring, launchTimedOut, killedAfterGrace, launchesHeld, urlOpened, notificationPresented, notificationDropped, notificationAnswered,
        notificationsCoalesced, sleep, wake, timeChanged, localeChanged, lockChanged, journalPositionLost, heldDataSetAside,
        journalEntryUntested,
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
    /// `--no-deadlines`: every acknowledgement and launch deadline and the background-task budget off, whatever the
    /// configuration says (``Configuration/liftDeadlines()``), at start and at every reload; for development.
    public var noDeadlines: Bool

    public init(
        instance: DaemonInstance,
        socketPath: String,
        stateDirectory: String,
        configPath: String,
        configRequired: Bool,
        noDeadlines: Bool = false
    ) {
        self.instance = instance
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.configPath = configPath
        self.configRequired = configRequired
        self.noDeadlines = noDeadlines
    }

    /// The configuration files' settings, with the deadlines lifted under `--no-deadlines`.
    func loadConfiguration() throws(ConfigurationError) -> Configuration {
        var configuration = try ConfigurationLoader.load(path: self.configPath, required: self.configRequired)
        if self.noDeadlines { configuration.liftDeadlines() }
        return configuration
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

/// The daemon from start-up to exit: the start-up steps (``DaemonStartUp``), then the services, each in its turn
/// (the store's writer, the Varlink server, the watchdog, STATUS=, the reloader), until SIGTERM or SIGINT stops
/// them in the reverse order.
public enum Daemon {
    /// Runs until SIGTERM or SIGINT and returns the exit status.
    public static func run(options: DaemonOptions) async -> Int32 {
        let configuration: Configuration
        do {
            configuration = try options.loadConfiguration()
        } catch {
            printError("\(error); fix the configuration and start again")
            return DaemonExit.configuration
        }
        let descriptorLimit = raiseDescriptorLimit()
        let levelControl = LogLevelControl(configuration.logLevel)
        DaemonLogging.bootstrap(identifier: "coalesced", control: levelControl)
        let logger = Logger(label: "coalesced")
        if options.noDeadlines {
            logger.warning(
                "DEADLINES ARE OFF (--no-deadlines): no app is killed for an acknowledgement it misses, background tasks never expire, Launch waits for its app without end; for development only, never in production",
                metadata: ["config": "\(options.configPath)"]
            )
        }
        // With more than one loop, connections are spread over them, so that many clients' calls are parsed and
        // decided on several cores (an app's state is kept under a lock, and each stream's writes go through its
        // own loop's queue, in the order they were decided).
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoops)
        let status: Int32
        let startUp = DaemonStartUp(
            options: options,
            configuration: configuration,
            descriptorLimit: descriptorLimit,
            group: group,
            logger: logger
        )
        switch await startUp.start() {
        case .failure(let failure):
            status = failure.status
        case .success(let started):
            status = await Self.serve(started, options: options, levelControl: levelControl, group: group, logger: logger)
        }
        try? await group.shutdownGracefully()  // exiting anyway; nothing is left to report a failure to
        return status
    }

    /// Runs the services until the daemon is told to stop; returns the exit status.
    private static func serve(
        _ started: DaemonStartUp.Started,
        options: DaemonOptions,
        levelControl: LogLevelControl,
        group: MultiThreadedEventLoopGroup,
        logger: Logger
    ) async -> Int32 {
        let notifier = SystemdNotifier()
        let status = StatusReporter(
            notifier: notifier, server: started.server, address: started.address, apps: started.apps, system: started.system
        )
        let reloader = Reloader(
            options: options,
            state: started.state,
            apps: started.apps,
            journal: started.journal,
            server: started.server,
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
                        "socket": "\(started.address)", "instance": "\(options.instance.rawValue)",
                        "version": "\(CoalescedVersion.string)", "message_id": "\(MessageID.started)",
                    ]
                )
            }
        )
        // Started in this order and stopped in the reverse: the reloader first, then STATUS= (which says
        // STOPPING=1), the watchdog, the notification timers and agents, the apps (left as they are for the next
        // start), the server (its connections
        // and streaming calls), and the store last.
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: StoreService(store: started.apps.store, logger: logger)),
                .init(service: ServingService(server: started.server)),
                .init(service: AppsService(apps: started.apps)),
                .init(service: NotificationsService(center: started.notifications)),
                .init(service: SystemService(system: started.system)),
                .init(service: PressureService(monitor: started.pressure)),
                .init(service: JournalService(watches: started.journal)),
                .init(service: WatchdogService(notifier: notifier, loops: Array(group.makeIterator()))),
                .init(service: StatusService(status: status, notifier: notifier, logger: logger)),
                .init(service: reloader, successTerminationBehavior: .gracefullyShutdownGroup),
            ],
            logger: logger
        )
        configuration.gracefulShutdownSignals = [.sigterm, .sigint]
        // The bus outlives the services: the last of them may still thaw an app's unit or start one.
        defer { started.system.closeBus() }
        do {
            try await ServiceGroup(configuration: configuration).run()
            return DaemonExit.success
        } catch {
            logger.error("Service group failed", metadata: ["error": "\(error)"])
            return DaemonExit.failure
        }
    }

    /// The server's limits under `configuration`; MaxConnections= no more than the descriptors leave room for.
    static func limits(_ configuration: Configuration, connectionBudget: Int) -> VarlinkServerLimits {
        VarlinkServerLimits(
            maximumMessageSize: configuration.maxMessageSize,
            maximumConnections: min(configuration.maxConnections, connectionBudget),
            maximumConnectionsPerUser: configuration.maxConnectionsPerUser,
            reservedConnections: configuration.reservedConnections,
            incompleteMessageTimeout: configuration.incompleteMessageTimeout
        )
    }
}

/// Writes one line to stderr: for problems the person starting the daemon must see before logging is set up.
func printError(_ message: String) {
    StderrSink.writeLine("coalesced: \(message)")
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The span as a setting of the configuration writes it, systemd's way: `5s`, `1500ms`.
    var settingText: String {
        let milliseconds = self.nanoseconds / 1_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

extension Optional where Wrapped == Duration {
    /// A span that may be infinite (`nil`) as a setting writes it: `5s`, or `infinity`.
    var settingText: String { self?.settingText ?? "infinity" }

    /// Seconds as the interfaces give a span that may be infinite: a number, or null for infinity.
    var secondsValue: JSONValue { self.map { .double($0.seconds) } ?? .null }
}
