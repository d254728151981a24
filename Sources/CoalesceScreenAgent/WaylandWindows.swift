import WaylandSession

/// The windows of a Wayland compositor that speaks wlr-foreign-toplevel-management (labwc, wayfire, sway, kiosk
/// compositors built on wlroots), followed through the protocol: each toplevel is a window, focused while
/// `activated`, hidden while `minimized`, shown otherwise.
///
/// The protocol names no process: a window is reported without one, and the daemon takes its app id alone. Only the
/// user's own processes can open windows on the compositor's socket (it lives in the user's runtime directory), and
/// the daemon matches a report only against the reporting user's apps. Nor does it say which workspace is shown: a
/// compositor that keeps a window on a hidden workspace without minimizing it has the window reported as shown.
final class WaylandWindows: WindowSource {
    let source = "wayland"
    private let toplevels: WaylandToplevels

    /// - Parameters:
    ///   - display: as `WAYLAND_DISPLAY` names it; `nil`: `WAYLAND_DISPLAY`'s.
    ///   - timeout: how long an answer of the compositor may take.
    init(display: String?, timeout: Duration) throws {
        self.toplevels = try WaylandToplevels(display: display, timeout: timeout)
    }

    var descriptor: CInt { self.toplevels.descriptor }
    let deadline: ContinuousClock.Instant? = nil

    func read() throws -> WindowNews {
        let changed: Bool
        do {
            changed = try self.toplevels.read()
        } catch {
            // The compositor gone is the session's end, as sway's shutdown event is; anything else, a failure.
            guard error.kind == .closed else { throw error }
            return .ended("the compositor at \(self.toplevels.display) closed the connection")
        }
        if self.toplevels.finished { return .ended("the compositor at \(self.toplevels.display) stopped telling its windows") }
        return changed ? .changed : .nothing
    }

    func deadlinePassed() -> WindowNews { .nothing }

    func windows() throws -> [SessionWindow] {
        self.toplevels.toplevels.compactMap { toplevel in
            SessionWindow(
                id: String(toplevel.id), appID: toplevel.appID, pid: nil,
                presentation: Self.presentation(activated: toplevel.activated, minimized: toplevel.minimized),
                title: toplevel.title
            )
        }
    }

    func focus(_ id: String) throws -> Bool {
        guard let number = UInt64(id) else { return false }
        return try self.toplevels.activate(number)
    }

    /// Where a toplevel in these states is: a minimized one is hidden even if it kept `activated`.
    static func presentation(activated: Bool, minimized: Bool) -> SessionWindow.Presentation {
        minimized ? .hidden : activated ? .focused : .shown
    }
}
