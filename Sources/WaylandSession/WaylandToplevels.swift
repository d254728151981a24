import CWaylandToplevel
import Glibc

/// One toplevel window of the session, as the compositor described it at its last `done`.
public struct WaylandToplevel: Hashable, Sendable {
    /// This connection's number for it: it names the same window as long as the connection lasts, and is never
    /// given to another.
    public var id: UInt64
    /// The app_id the client set (empty until it sets one).
    public var appID: String
    public var title: String
    /// It has the keyboard focus.
    public var activated: Bool
    /// It is minimized: not on screen.
    public var minimized: Bool
}

/// One connection to a Wayland compositor that speaks wlr-foreign-toplevel-management-unstable-v1 (wlroots'
/// compositors: sway, labwc, wayfire, kiosk compositors built on wlroots), following its toplevel windows: its
/// descriptor to poll, what a read of it brought, and each window as its last `done` left it.
///
/// The protocol names no process behind a window: a window is the app its app_id says. Every wait for the compositor
/// is bounded by the timeout given at ``init(display:timeout:)``. Not for more than one thread.
public final class WaylandToplevels {
    /// The display, as `WAYLAND_DISPLAY` names it.
    public let display: String
    /// The compositor said it sends no more (`finished`): its windows are no longer followed.
    public private(set) var finished = false

    private let connection: OpaquePointer
    private let timeout: Duration
    private var registry: OpaquePointer?
    private var manager: OpaquePointer?
    private var seat: OpaquePointer?
    private var windows: [OpaquePointer: Window] = [:]
    private var nextID: UInt64 = 1
    /// A window was done, or closed, since ``read()`` last said so.
    private var changed = false

    /// The protocol's version this client is written for: v3 adds `parent`, which it takes and passes over.
    private static let managerVersion: UInt32 = 3

    /// One window's state as the compositor is describing it, and as it last described it in full.
    private struct Window {
        var pending: WaylandToplevel
        var done: WaylandToplevel?
    }

    /// Connects to `display` (`nil`: `WAYLAND_DISPLAY`'s, as every Wayland client does) and reads the windows it shows.
    /// - Parameter timeout: how long any one wait for the compositor may take.
    /// - Throws: ``WaylandError``: `.cannotConnect`, `.unsupported` when the compositor lacks the protocol.
    public init(display: String?, timeout: Duration) throws(WaylandError) {
        let name = display ?? Self.environment("WAYLAND_DISPLAY") ?? "wayland-0"
        self.display = name
        self.timeout = timeout
        guard let connection = wl_display_connect(name) else {
            let reason = errno == ENOENT ? "no compositor listens there (check WAYLAND_DISPLAY and XDG_RUNTIME_DIR)" : String(cString: strerror(errno))
            throw WaylandError(.cannotConnect, display: name, "cannot open the Wayland display \(name): \(reason)")
        }
        self.connection = connection
        self.registry = wl_display_get_registry(connection)
        wl_registry_add_listener(self.registry, Self.registryListener, self.context)
        // The globals (where the manager is bound), then the windows the manager announces at once.
        try self.roundtrip()
        guard self.manager != nil else {
            throw WaylandError(
                .unsupported, display: name,
                "the compositor at \(name) does not offer wlr-foreign-toplevel-management (zwlr_foreign_toplevel_manager_v1), "
                    + "so its windows cannot be followed through it; on sway, follow it through its IPC (--source sway)"
            )
        }
        try self.roundtrip()
        self.changed = false
    }

    deinit {
        for handle in self.windows.keys { zwlr_foreign_toplevel_handle_v1_destroy(handle) }
        if let manager = self.manager { zwlr_foreign_toplevel_manager_v1_destroy(manager) }
        if let seat = self.seat { wl_seat_destroy(seat) }
        if let registry = self.registry { wl_registry_destroy(registry) }
        wl_display_disconnect(self.connection)
    }

    /// Readable when the compositor has sent something: call ``read()``.
    public var descriptor: CInt { wl_display_get_fd(self.connection) }

    /// Every window the compositor has described in full, by id.
    public var toplevels: [WaylandToplevel] {
        self.windows.values.compactMap(\.done).sorted { $0.id < $1.id }
    }

    /// Reads what the compositor sent, without blocking, and takes it in.
    /// - Returns: whether a window changed, appeared or closed.
    /// - Throws: ``WaylandError``, `.closed` when the compositor is gone.
    public func read() throws(WaylandError) -> Bool {
        while wl_display_prepare_read(self.connection) != 0 {
            guard wl_display_dispatch_pending(self.connection) >= 0 else { throw self.lost() }
        }
        guard wl_display_read_events(self.connection) >= 0 else { throw self.lost() }
        guard wl_display_dispatch_pending(self.connection) >= 0 else { throw self.lost() }
        try self.flush()
        defer { self.changed = false }
        return self.changed
    }

    /// Asks the compositor to focus the window `id` (on the first seat it offered).
    /// - Returns: `false` when there is no such window, or no seat to focus it on.
    public func activate(_ id: UInt64) throws(WaylandError) -> Bool {
        guard let seat = self.seat, let handle = self.windows.first(where: { $0.value.pending.id == id })?.key else {
            return false
        }
        zwlr_foreign_toplevel_handle_v1_activate(handle, seat)
        try self.flush()
        return true
    }

    // MARK: Events

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func of(_ data: UnsafeMutableRawPointer?) -> WaylandToplevels {
        Unmanaged<WaylandToplevels>.fromOpaque(data!).takeUnretainedValue()
    }

    private func global(name: UInt32, interface: String, version: UInt32) {
        if interface == "zwlr_foreign_toplevel_manager_v1", self.manager == nil {
            let bound = wl_registry_bind(
                self.registry, name, coalesced_wlr_toplevel_manager_interface(), min(version, Self.managerVersion)
            )
            self.manager = OpaquePointer(bound)
            zwlr_foreign_toplevel_manager_v1_add_listener(self.manager, Self.managerListener, self.context)
        } else if interface == "wl_seat", self.seat == nil {
            // Version 1 is enough: the seat is only named in `activate`.
            self.seat = OpaquePointer(wl_registry_bind(self.registry, name, coalesced_wl_seat_interface(), 1))
        }
    }

    private func announced(_ handle: OpaquePointer) {
        let window = WaylandToplevel(id: self.nextID, appID: "", title: "", activated: false, minimized: false)
        self.nextID += 1
        self.windows[handle] = Window(pending: window, done: nil)
        zwlr_foreign_toplevel_handle_v1_add_listener(handle, Self.handleListener, self.context)
    }

    private func done(_ handle: OpaquePointer) {
        guard let window = self.windows[handle] else { return }
        if window.done != window.pending { self.changed = true }
        self.windows[handle]?.done = window.pending
    }

    private func closed(_ handle: OpaquePointer) {
        if self.windows.removeValue(forKey: handle)?.done != nil { self.changed = true }
        zwlr_foreign_toplevel_handle_v1_destroy(handle)
    }

    private func managerFinished() {
        // The compositor destroys the manager after this event: only the proxy is left to free.
        self.finished = true
        self.changed = true
        if let manager = self.manager { zwlr_foreign_toplevel_manager_v1_destroy(manager) }
        self.manager = nil
    }

    nonisolated(unsafe) private static let registryListener = listening(
        wl_registry_listener(
            global: { data, _, name, interface, version in
                guard let interface else { return }
                WaylandToplevels.of(data).global(name: name, interface: String(cString: interface), version: version)
            },
            global_remove: { _, _, _ in }
        )
    )

    nonisolated(unsafe) private static let managerListener = listening(
        zwlr_foreign_toplevel_manager_v1_listener(
            toplevel: { data, _, handle in
                guard let handle else { return }
                WaylandToplevels.of(data).announced(handle)
            },
            finished: { data, _ in WaylandToplevels.of(data).managerFinished() }
        )
    )

    nonisolated(unsafe) private static let handleListener = listening(
        zwlr_foreign_toplevel_handle_v1_listener(
            title: { data, handle, title in
                guard let handle, let title else { return }
                WaylandToplevels.of(data).windows[handle]?.pending.title = String(cString: title)
            },
            app_id: { data, handle, appID in
                guard let handle, let appID else { return }
                WaylandToplevels.of(data).windows[handle]?.pending.appID = String(cString: appID)
            },
            output_enter: { _, _, _ in },
            output_leave: { _, _, _ in },
            state: { data, handle, states in
                guard let handle, let states else { return }
                let values = WaylandToplevels.values(states.pointee)
                let toplevels = WaylandToplevels.of(data)
                toplevels.windows[handle]?.pending.activated = values.contains(ZWLR_FOREIGN_TOPLEVEL_HANDLE_V1_STATE_ACTIVATED.rawValue)
                toplevels.windows[handle]?.pending.minimized = values.contains(ZWLR_FOREIGN_TOPLEVEL_HANDLE_V1_STATE_MINIMIZED.rawValue)
            },
            done: { data, handle in
                guard let handle else { return }
                WaylandToplevels.of(data).done(handle)
            },
            closed: { data, handle in
                guard let handle else { return }
                WaylandToplevels.of(data).closed(handle)
            },
            // A dialog's parent: the dialog is a window of its own all the same.
            parent: { _, _, _ in }
        )
    )

    nonisolated(unsafe) private static let syncListener = listening(
        wl_callback_listener(done: { data, _, _ in data?.storeBytes(of: true, as: Bool.self) })
    )

    /// A listener where libwayland can keep its address for as long as the process lives.
    private static func listening<Listener>(_ listener: Listener) -> UnsafeMutablePointer<Listener> {
        let kept = UnsafeMutablePointer<Listener>.allocate(capacity: 1)
        kept.initialize(to: listener)
        return kept
    }

    /// The 32-bit values of a `wl_array`.
    private static func values(_ array: wl_array) -> [UInt32] {
        guard let data = array.data else { return [] }
        let count = array.size / MemoryLayout<UInt32>.size
        return (0..<count).map { data.load(fromByteOffset: $0 * MemoryLayout<UInt32>.size, as: UInt32.self) }
    }

    // MARK: The connection

    /// Sends a sync and takes in everything the compositor sends until it answers, for at most the timeout.
    private func roundtrip() throws(WaylandError) {
        let answered = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
        answered.storeBytes(of: false, as: Bool.self)
        guard let callback = wl_display_sync(self.connection) else {
            answered.deallocate()
            throw self.lost()
        }
        defer {
            wl_callback_destroy(callback)
            answered.deallocate()
        }
        wl_callback_add_listener(callback, Self.syncListener, answered)
        let deadline = ContinuousClock.now + self.timeout
        while !answered.load(as: Bool.self) {
            try self.flush()
            if wl_display_prepare_read(self.connection) != 0 {
                guard wl_display_dispatch_pending(self.connection) >= 0 else { throw self.lost() }
                continue
            }
            let left = deadline - ContinuousClock.now
            var descriptor = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = max(0, Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready <= 0 {
                let problem = errno
                wl_display_cancel_read(self.connection)
                if ready < 0, problem == EINTR { continue }
                if ready < 0 { throw WaylandError(.failed, display: self.display, "poll on the Wayland display \(self.display) failed: \(String(cString: strerror(problem)))") }
                throw WaylandError(.timedOut, display: self.display, "the compositor at \(self.display) did not answer within \(self.timeout)")
            }
            guard wl_display_read_events(self.connection) >= 0 else { throw self.lost() }
            guard wl_display_dispatch_pending(self.connection) >= 0 else { throw self.lost() }
        }
    }

    private func flush() throws(WaylandError) {
        // EAGAIN: the socket is full for now; what is left goes with the next flush.
        if wl_display_flush(self.connection) < 0, errno != EAGAIN { throw self.lost() }
    }

    private func lost() -> WaylandError {
        let code = wl_display_get_error(self.connection)
        var protocolError: String?
        if code == EPROTO {
            var interface: UnsafePointer<wl_interface>?
            var id: UInt32 = 0
            let number = wl_display_get_protocol_error(self.connection, &interface, &id)
            protocolError = "\(interface.map { String(cString: $0.pointee.name) } ?? "an object") #\(id), error \(number)"
        }
        return WaylandError.lost(code: code == 0 ? EPIPE : code, display: self.display, protocolError: protocolError)
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }
}
