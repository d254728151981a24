import ArgumentParser
import CoalesceWire
import Systemd

@main
struct ScreenAgent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalesce-screen-agent",
        abstract: "Tell coalesced which windows of the user's apps the session shows, for their scenes.",
        discussion: """
            Follows the windows of the graphical session it runs in, and reports each change to coalesced \
            (io.coalesced.Screen.ReportWindows): each window of one of the user's running apps is a scene of that \
            app, and the app becomes active, inactive or background as its windows are focused, shown or hidden. \
            Runs as a user service in the graphical session (coalesce-screen-agent.service); stops on SIGTERM, and \
            when the session ends. Window systems: sway, through its IPC socket ($SWAYSOCK); Wayland compositors that \
            speak wlr-foreign-toplevel-management (labwc, wayfire, kiosk compositors built on wlroots), on the \
            display $WAYLAND_DISPLAY names; X11 window managers that keep EWMH's properties (openbox, xfwm4, KWin, \
            mutter…), on the display $DISPLAY names. On X11 a window's process is the one the X server names (the \
            X-Resource extension), not the _NET_WM_PID it carries; the Wayland protocol names none, so there a \
            window is the app its app id says.
            """,
        version: CoalescedVersion.string
    )

    enum Source: String, ExpressibleByArgument, CaseIterable {
        case auto, sway, wayland, x11
    }

    @Option(
        name: .customLong("source"),
        help: ArgumentHelp(
            "The window system to follow: sway, wayland (wlr-foreign-toplevel-management), x11, or auto (sway where "
                + "$SWAYSOCK is set, else wayland where $WAYLAND_DISPLAY is, else X11 where $DISPLAY is).",
            valueName: "source"
        )
    )
    var source: Source = .auto

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
        help: ArgumentHelp("How long a call to the window system or the daemon may take, in seconds.", valueName: "seconds")
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
        let socket = self.socket ?? (try? self.instancePaths.socket) ?? InstancePaths.systemSocket
        let timeout = Duration.milliseconds(Int64(self.callTimeout * 1000))
        let windows: any WindowSource
        do {
            windows = try self.windowSource(timeout: timeout)
        } catch {
            Log.problem("\(error)")
            throw ExitCode(1)
        }
        let status = Agent(socketPath: socket, callTimeout: timeout, windows: windows).run()
        if status != 0 { throw ExitCode(status) }
    }

    private func windowSource(timeout: Duration) throws -> any WindowSource {
        let sway = ProcessEnvironment.value("SWAYSOCK").flatMap { $0.isEmpty ? nil : $0 }
        let wayland = ProcessEnvironment.value("WAYLAND_DISPLAY").flatMap { $0.isEmpty ? nil : $0 }
        let display = ProcessEnvironment.value("DISPLAY").flatMap { $0.isEmpty ? nil : $0 }
        // auto: sway where its socket is named (its IPC names each window's process), else the Wayland protocol,
        // else X11 (Xwayland sets DISPLAY in a Wayland session too).
        let chosen =
            self.source != .auto
            ? self.source : sway != nil ? .sway : wayland != nil ? .wayland : display != nil ? .x11 : .auto
        switch chosen {
        case .sway:
            guard let sway else { throw SourceError("--source sway, but SWAYSOCK is not set: run in sway's session") }
            return try SwayWindows(path: sway, timeout: timeout)
        case .wayland:
            guard let wayland else {
                throw SourceError("--source wayland, but WAYLAND_DISPLAY is not set: run in the Wayland session")
            }
            return try WaylandWindows(display: wayland, timeout: timeout)
        case .x11:
            guard let display else { throw SourceError("--source x11, but DISPLAY is not set: run in the X session") }
            return try X11Windows(display: display, timeout: timeout)
        case .auto:
            throw SourceError(
                "no window system to follow: none of SWAYSOCK, WAYLAND_DISPLAY and DISPLAY is set; run in the graphical "
                    + "session, or say --source"
            )
        }
    }
}

/// The window system asked for, or found, cannot be followed.
struct SourceError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
