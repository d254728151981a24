import ArgumentParser
import CoalesceServer
import CoalesceWire

@main
struct Coalesced: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalesced",
        abstract: "Run the coalesced daemon, which gives Linux programs an iOS-style app lifecycle over Varlink.",
        discussion: """
            Serves Varlink on a Unix socket: the one systemd passes (socket activation), or one it creates. \
            Root runs the system instance (/run/coalesced/io.coalesced, /var/lib/coalesced, \
            /etc/coalesced/coalesced.conf); anyone else a user instance under $XDG_RUNTIME_DIR, $XDG_STATE_HOME \
            and $XDG_CONFIG_HOME. SIGHUP reloads the configuration; SIGTERM stops.
            """,
        version: CoalescedVersion.string
    )

    @Flag(name: .customLong("system"), help: "Run the system instance, whoever runs it.")
    var system = false

    @Flag(name: .customLong("user"), help: "Run a user instance, even as root.")
    var user = false

    @Option(name: .customLong("socket"), help: ArgumentHelp("Serve this socket path.", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Keep durable state here.", valueName: "dir"))
    var stateDirectory: String?

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp("Read this configuration file (and its .d/ drop-ins).", valueName: "file")
    )
    var config: String?

    @Flag(
        name: .customLong("no-deadlines"),
        help: """
            For development: no acknowledgement or launch deadline and no background-task budget, whatever the \
            configuration says, so that an app stopped in a debugger is not killed. Logged as a warning at start.
            """
    )
    var noDeadlines = false

    func validate() throws {
        if self.system && self.user { throw ValidationError("--system and --user exclude each other") }
        if self.socket == nil {
            // The same decision, and the same words, as coalescectl's.
            do { _ = try InstancePaths(instance: self.instance).socket } catch { throw ValidationError("\(error)") }
        }
    }

    var instance: DaemonInstance { DaemonInstance(system: self.system, user: self.user) }

    func run() async throws {
        let paths = InstancePaths(instance: self.instance)
        let options = DaemonOptions(
            instance: self.instance,
            socketPath: try self.socket ?? paths.socket,  // validated above
            stateDirectory: self.stateDirectory ?? paths.stateDirectory,
            configPath: self.config ?? paths.config,
            configRequired: self.config != nil,
            noDeadlines: self.noDeadlines
        )
        let status = await Daemon.run(options: options)
        if status != 0 { throw ExitCode(status) }
    }
}
