import CoalesceStore
import CoalesceWire
import Logging
import NIOCore
import NIOPosix
import Systemd
import Varlink

/// The steps from a loaded configuration to a bound socket, in order: the state directory, the socket systemd passed
/// (or the directory of the one to create), the store and everything accepted before (recovered before READY=1),
/// the interfaces, the socket bound. A step that fails is logged with what to do, and the daemon exits with the
/// status that says what kind of failure it was.
struct DaemonStartUp {
    /// What the services run.
    struct Started {
        var state: DaemonState
        var apps: AppManager
        var notifications: NotificationCenter
        var system: SystemFollower
        var pressure: PressureMonitor
        var journal: JournalWatches
        var server: VarlinkServer
        var address: VarlinkListenAddress
    }

    /// A step failed and was logged; the daemon exits with `status`.
    struct Failure: Error {
        var status: Int32
    }

    let options: DaemonOptions
    let configuration: Configuration
    /// The soft RLIMIT_NOFILE, raised to the hard limit (``raiseDescriptorLimit()``).
    let descriptorLimit: Int
    let group: MultiThreadedEventLoopGroup
    let logger: Logger

    func start() async -> Result<Started, Failure> {
        let options = self.options
        let logger = self.logger
        // From here on failures are logged: as one readable line on a terminal, as an entry under systemd.
        if let failure = createDirectory(options.stateDirectory, mode: 0o700) {
            logger.critical(
                "Cannot create the state directory; pass --state-dir or fix permissions",
                metadata: ["path": "\(options.stateDirectory)", "reason": "\(failure)", "message_id": "\(MessageID.startFailed)"]
            )
            return .failure(Failure(status: DaemonExit.cannotCreate))
        }

        let address: VarlinkListenAddress
        do {
            address = try self.listenAddress()
        } catch {
            logger.critical(
                "Cannot use the sockets passed by systemd",
                metadata: ["reason": "\(error)", "message_id": "\(MessageID.startFailed)"]
            )
            return .failure(Failure(status: DaemonExit.failure))
        }

        if case .path(let path) = address, let slash = path.lastIndex(of: "/"), slash != path.startIndex,
            let failure = createDirectory(String(path[..<slash]), mode: 0o755)
        {
            logger.critical(
                "Cannot create the socket's directory; pass --socket or fix permissions",
                metadata: ["reason": "\(failure)", "message_id": "\(MessageID.startFailed)"]
            )
            return .failure(Failure(status: DaemonExit.cannotCreate))
        }

        if !ProcessHandle.identifiesProcesses {
            logger.warning(
                "Cannot read this boot's id (/proc/sys/kernel/random/boot_id): apps whose processes outlive a restart of the daemon are launched anew instead of taken up; do not hide /proc/sys from the daemon (ProcSubset=pid)"
            )
        }
        let state = DaemonState(
            configuration: self.configuration,
            connectionBudget: connectionBudget(descriptorLimit: self.descriptorLimit)
        )
        state.checkConnectionBudget(logger: logger)
        // One connection to the bus for the daemon's life: launch units, sleep, the lock and the locale.
        let busScope: BusConnection.Scope = options.instance == .system ? .system : .user
        var bus: BusConnection?
        var busProblem: String?
        do {
            bus = try BusConnection(busScope)
        } catch {
            busProblem = "\(error)"
        }
        let apps: AppManager
        let notifications: NotificationCenter
        let system: SystemFollower
        let refreshes: RefreshScheduler
        do {
            // Everything accepted before is recovered before READY=1; a large store may take a while.
            SystemdNotifier().extendTimeout(by: .seconds(90), status: "Recovering the store in \(options.stateDirectory)")
            // A commit's answers wake each connection once, after the last of them.
            let store = try Store(stateDirectory: options.stateDirectory) { finish in VarlinkAnswerGathering.gather(finish) }
            try await importRegistryFile(stateDirectory: options.stateDirectory, into: store, logger: logger)
            apps = try AppManager(
                store: store,
                daemon: state,
                eventLoop: self.group.next(),
                logger: logger,
                startUnit: { [bus, busProblem] unit in try await startUnit(unit, on: bus, problem: busProblem) },
                unitControl: .systemd(bus, problem: busProblem)
            )
            // Requests the store kept are taken up, and what came due while the daemon was down presented, before
            // READY=1.
            notifications = try NotificationCenter(store: store, apps: apps, daemon: state, logger: logger)
            refreshes = try RefreshScheduler(apps: apps, logger: logger)
            system = SystemFollower(
                settings: self.configuration.system, scope: busScope, bus: bus, busProblem: busProblem,
                apps: apps, notifications: notifications, refreshes: refreshes, logger: logger
            )
            try await notifications.start()
            if !apps.store.isWritable {
                logger.warning(
                    "The file system holding \(options.stateDirectory) is full: serving what the store holds, and refusing every write until there is room; free space there",
                    metadata: ["path": "\(options.stateDirectory)"]
                )
            }
        } catch {
            logger.critical(
                "Cannot open the store",
                metadata: ["reason": "\(error)", "message_id": "\(MessageID.startFailed)"]
            )
            return .failure(Failure(status: DaemonExit.failure))
        }
        // The pressure file and its triggers are tried now: the mode in force is known before READY=1.
        let pressure = PressureMonitor(settings: self.configuration.memory, apps: apps, logger: logger)
        let journal = JournalWatches(settings: self.configuration.journal, apps: apps, store: apps.store, logger: logger)
        let statistics = VarlinkServerStatistics()
        let service = VarlinkService(
            info: VarlinkServiceInfo(
                vendor: "coalesced",
                product: "coalesced",
                version: CoalescedVersion.string,
                url: "https://github.com/coalesced/coalesced"
            ),
            interfaces: [
                SystemInterface.make(
                    daemon: state, statistics: statistics, apps: apps, notifications: notifications, system: system,
                    pressure: pressure, journal: journal
                ),
                AppInterface.make(apps: apps, daemon: state, refreshes: refreshes),
                NotificationsInterface.make(center: notifications),
                ScreenInterface.make(apps: apps),
                ProtocolInterface.make(),
            ],
            protocolErrorInterface: ProtocolInterface.name
        )
        let server = VarlinkServer(
            service: service,
            limits: state.serverLimits,
            statistics: statistics,
            group: self.group,
            logger: logger,
            // Root, the daemon's user and the admin group may use the reserved connections, whatever others hold.
            isPrivileged: { peer in Authorization.isAdmin(peer, group: state.configuration.adminGroup) }
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
            return .failure(Failure(status: DaemonExit.failure))
        }
        return .success(
            Started(state: state, apps: apps, notifications: notifications, system: system, pressure: pressure, journal: journal, server: server,
                address: address)
        )
    }

    /// The socket systemd passed, or the path to create.
    private func listenAddress() throws -> VarlinkListenAddress {
        let sockets = try ListenFDs.take()
        guard !sockets.isEmpty else { return .path(self.options.socketPath) }
        // One socket is expected; when several are passed, the one named io.coalesced (FileDescriptorName=) wins.
        let chosen = sockets.first { $0.name == "io.coalesced" } ?? sockets[0]
        for unused in sockets where unused.descriptor != chosen.descriptor {
            unused.close()
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
    do {
        try await store.save(all: registrations)
    } catch {
        guard case .diskFull = error else { throw error }
        // The file stays, and the start that finds room imports it; the start says the disk is full.
        logger.notice(
            "Not importing the app registry while the disk is full; the next start with room does",
            metadata: ["apps": "\(registrations.count)", "from": "\(file.path)"]
        )
        return
    }
    try file.markImported()
    logger.notice(
        "Imported the app registry into the store",
        metadata: ["apps": "\(registrations.count)", "from": "\(file.path)", "store": "\(store.path)"]
    )
}

/// Asks systemd to start a unit (StartUnit, mode "replace") and returns once the job is queued; the app it starts
/// then attaches on its own.
func startUnit(_ unit: String, on bus: BusConnection?, problem: String?) async throws(SystemdError) {
    guard let bus else {
        throw SystemdError(operation: "call org.freedesktop.systemd1.Manager.StartUnit", errno: Errno.ENOTCONN, busError: problem)
    }
    _ = try await bus.call(
        destination: "org.freedesktop.systemd1",
        path: "/org/freedesktop/systemd1",
        interface: "org.freedesktop.systemd1.Manager",
        member: "StartUnit",
        arguments: [.string(unit), .string("replace")],
        timeout: .seconds(25)
    )
}

/// Every connection and every attached app holds a descriptor; the soft limit (often 1,024) is lifted to the hard
/// limit, as systemd's own daemons do, so that MaxConnections= is what bounds them. Returns the soft limit in force.
func raiseDescriptorLimit() -> Int {
    DescriptorLimit.raiseToHardLimit()
}

/// Descriptors the daemon keeps besides its connections, beyond those open at start-up: the store's files, the
/// journal's socket, a pidfd per attached app, the server's spare descriptor.
let descriptorHeadroom = 64

/// The connections the descriptor limit leaves room for: the limit, less the descriptors open now and
/// ``descriptorHeadroom``.
func connectionBudget(descriptorLimit: Int) -> Int {
    guard descriptorLimit != Int.max else { return Int.max }
    // Without /proc none are counted, and the headroom is all that is kept back.
    let open = (try? DirectoryListing.names(in: "/proc/self/fd").count) ?? 0
    return max(descriptorLimit - open - descriptorHeadroom, 1)
}

extension DaemonState {
    /// Logs when MaxConnections= does not fit the descriptor limit: the daemon then serves as many connections as
    /// fit, and refuses the others with TooManyConnections rather than failing to accept them.
    func checkConnectionBudget(logger: Logger) {
        let configured = self.configuration.maxConnections
        guard configured > self.connectionBudget else { return }
        logger.warning(
            "MaxConnections= does not fit the file descriptor limit; serving fewer connections. Raise LimitNOFILE= or lower MaxConnections=",
            metadata: ["max_connections": "\(configured)", "serving": "\(self.connectionBudget)"]
        )
    }
}

/// Creates a directory, and its missing parents with mode 0755, giving the directory itself `mode` when it creates
/// it; an existing directory keeps the mode it has. `nil` on success, the reason otherwise.
func createDirectory(_ path: String, mode: UInt32) -> String? {
    do throws(FileError) {
        try makeDirectories(path, permissions: mode)
        return nil
    } catch {
        return "\(error)"
    }
}

