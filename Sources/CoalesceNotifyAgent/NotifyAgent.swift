import ArgumentParser
import CoalesceWire

@main
struct NotifyAgent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalesce-notify-agent",
        abstract: "Show coalesced's notifications on the desktop, and tell the apps what the user did with them.",
        discussion: """
            Streams the presentations of the user's apps from coalesced (io.coalesced.Notifications.Presentations) \
            and shows each through the desktop's notification server (org.freedesktop.Notifications on the session \
            bus). A click on a notification or one of its buttons, and a dismissal, go back to the app as \
            io.coalesced.Notifications.Respond. Runs as a user service in the graphical session \
            (coalesce-notify-agent.service); stops on SIGTERM.
            """,
        version: CoalescedVersion.string
    )

    @Option(
        name: .customLong("socket"),
        help: ArgumentHelp("Talk to the daemon on this socket.", valueName: "path"),
        completion: .file()
    )
    var socket: String?

    @Flag(name: .customLong("user"), help: "Talk to the user instance ($XDG_RUNTIME_DIR/coalesced/io.coalesced).")
    var user = false

    @Flag(name: .customLong("system"), help: "Talk to the system instance (/run/coalesced/io.coalesced).")
    var system = false

    @Option(
        name: .customLong("call-timeout"),
        help: ArgumentHelp(
            "How long a call to the notification server or the daemon may take, in seconds.",
            valueName: "seconds"
        )
    )
    var callTimeout: Double = 2

    func validate() throws {
        if self.system && self.user { throw ValidationError("--system and --user exclude each other") }
        guard self.callTimeout > 0, self.callTimeout <= 60 else {
            throw ValidationError("--call-timeout must be more than 0 and at most 60 seconds")
        }
        if self.socket == nil {
            // The same decision, and the same words, as coalesced's and coalescectl's.
            do { _ = try self.instancePaths.socket } catch { throw ValidationError("\(error)") }
        }
    }

    private var instancePaths: InstancePaths {
        InstancePaths(instance: DaemonInstance(system: self.system, user: self.user))
    }

    func run() throws {
        // Validated above: only a user instance without XDG_RUNTIME_DIR has no socket, and it is refused.
        let socket = self.socket ?? (try? self.instancePaths.socket) ?? InstancePaths.systemSocket
        let agent = Agent(socketPath: socket, callTimeout: .milliseconds(Int64(self.callTimeout * 1000)))
        let status = agent.run()
        if status != 0 { throw ExitCode(status) }
    }
}
