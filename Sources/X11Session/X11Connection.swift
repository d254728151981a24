import CXcb
import Glibc

/// A window's, or an atom's, number on the X server.
public typealias X11ID = UInt32

/// One connection to an X server through xcb, for a follower of its windows: its descriptor to poll, the events it
/// has read, and properties and the processes behind windows read in batches, each batch one round trip.
///
/// Every request that has an answer waits for it at most the timeout given at ``init(display:timeout:)``: a server
/// that stops answering is an error, not a follower stuck beyond SIGTERM's reach. Not for more than one thread.
public final class X11Connection {
    /// The display, as `DISPLAY` names it.
    public let display: String
    /// The root window of the display's default screen.
    public let root: X11ID
    /// The atoms of EWMH and ICCCM a follower reads.
    public let atoms: X11Atoms
    /// Whether the server names the process behind a window (X-Resource 1.2 or later); without it,
    /// ``processIDs(of:)`` answers `nil` for every window.
    public let namesProcesses: Bool

    private let connection: OpaquePointer
    private let timeout: Duration

    /// Opens `display` (such as `:0`) and reads the atoms a follower needs.
    /// - Parameter timeout: how long any one answer of the server may take.
    /// - Throws: ``X11Error`` when the display cannot be opened or does not answer.
    public init(display: String, timeout: Duration) throws(X11Error) {
        self.display = display
        self.timeout = timeout
        var screenNumber: Int32 = 0
        guard let connection = xcb_connect(display, &screenNumber) else {
            throw X11Error(.cannotConnect, display: display, "cannot open the X display \(display): out of memory")
        }
        let code = xcb_connection_has_error(connection)
        guard code == 0 else {
            xcb_disconnect(connection)
            throw X11Error.connection(code: code, display: display, opening: true)
        }
        self.connection = connection
        var screens = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<max(screenNumber, 0) where screens.rem > 0 { xcb_screen_next(&screens) }
        guard screens.rem > 0, let screen = screens.data else {
            xcb_disconnect(connection)
            throw X11Error(
                .cannotConnect, display: display, "cannot open the X display \(display): it has no screen \(screenNumber)"
            )
        }
        self.root = screen.pointee.root
        do {
            self.atoms = try Self.internAtoms(connection, display: display, timeout: timeout)
            self.namesProcesses = try Self.resourceVersion(connection, display: display, timeout: timeout)
        } catch {
            xcb_disconnect(connection)
            throw error
        }
    }

    deinit {
        xcb_disconnect(self.connection)
    }

    /// Readable when the server has sent something: call ``read()``.
    public var descriptor: CInt { xcb_get_file_descriptor(self.connection) }

    // MARK: Events

    /// Asks for `events` on `window` (replacing what this connection asked for on it before). Sent with the next
    /// request that waits for an answer, or by ``flush()``; a window that is gone by then is passed over.
    public func select(_ events: X11EventMask, on window: X11ID) {
        var mask = events.rawValue
        // Unchecked: the error for a window destroyed meanwhile comes as an event, which read() passes over.
        xcb_change_window_attributes(self.connection, window, XCB_CW_EVENT_MASK.rawValue, &mask)
    }

    /// Asks the window manager to activate `window`, as a pager or taskbar does (EWMH's `_NET_ACTIVE_WINDOW` client
    /// message to the root); the change comes back as the root's property, if the window manager grants it.
    public func requestActivation(of window: X11ID) {
        var message = xcb_client_message_event_t()
        message.response_type = UInt8(XCB_CLIENT_MESSAGE)
        message.format = 32
        message.window = window
        message.type = self.atoms.netActiveWindow
        // Source 2: a pager, which window managers obey without focus-stealing prevention; no timestamp; no window
        // the request comes from.
        message.data.data32 = (2, 0, 0, 0, 0)
        withUnsafeBytes(of: &message) { bytes in
            let mask = XCB_EVENT_MASK_SUBSTRUCTURE_REDIRECT.rawValue | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue
            _ = xcb_send_event(self.connection, 0, self.root, mask, bytes.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
        xcb_flush(self.connection)
    }

    /// Sends what is waiting to be sent.
    public func flush() {
        xcb_flush(self.connection)
    }

    /// The events the server has sent, read without waiting: those xcb holds already, then what the descriptor has.
    /// - Throws: ``X11Error`` of kind ``X11Error/Kind/closed`` when the server has closed the connection.
    public func read() throws(X11Error) -> [X11Event] {
        var events: [X11Event] = []
        while let event = xcb_poll_for_event(self.connection) {
            events.append(X11Event(event))
            free(event)
        }
        try self.check()
        return events
    }

    /// The events xcb has read while it waited for answers, without reading the descriptor: after a batch of
    /// requests, news the descriptor will not signal again.
    public func queuedEvents() -> [X11Event] {
        var events: [X11Event] = []
        while let event = xcb_poll_for_queued_event(self.connection) {
            events.append(X11Event(event))
            free(event)
        }
        return events
    }

    // MARK: Requests

    /// Reads each property asked for, all in one round trip; `nil` for a property the window does not have, of
    /// another type than asked, or on a window that is gone.
    public func properties(_ requests: [X11PropertyRequest]) throws(X11Error) -> [X11Property?] {
        let cookies = requests.map { request in
            xcb_get_property(
                self.connection, 0, request.window, request.property, request.type, 0,
                UInt32((request.maximumBytes + 3) / 4)
            ).sequence
        }
        let deadline = ContinuousClock.now + self.timeout
        var properties: [X11Property?] = []
        properties.reserveCapacity(cookies.count)
        for (cookie, request) in zip(cookies, requests) {
            guard let raw = try self.reply(to: cookie, deadline: deadline) else {
                properties.append(nil)
                continue
            }
            defer { free(raw) }
            let reply = raw.assumingMemoryBound(to: xcb_get_property_reply_t.self)
            // Type None: the window has no such property. Another type than asked: the server sends no value.
            guard reply.pointee.type != 0, reply.pointee.format != 0,
                request.type == X11Atoms.anyType || reply.pointee.type == request.type
            else {
                properties.append(nil)
                continue
            }
            let length = Int(xcb_get_property_value_length(reply))
            let bytes = [UInt8](UnsafeRawBufferPointer(start: xcb_get_property_value(reply), count: length))
            properties.append(
                X11Property(
                    type: reply.pointee.type, format: reply.pointee.format, bytes: bytes,
                    complete: reply.pointee.bytes_after == 0
                )
            )
        }
        return properties
    }

    /// The process behind each window, as the server knows it (X-Resource's local client pid): the pid of the
    /// client connection that created the window, which that client cannot forge (unlike `_NET_WM_PID`). `nil` for
    /// a window that is gone, a client on another host, or a server without X-Resource 1.2.
    public func processIDs(of windows: [X11ID]) throws(X11Error) -> [Int32?] {
        guard self.namesProcesses else { return windows.map { _ in nil } }
        let cookies = windows.map { window in
            var spec = xcb_res_client_id_spec_t(client: window, mask: XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue)
            return xcb_res_query_client_ids(self.connection, 1, &spec).sequence
        }
        let deadline = ContinuousClock.now + self.timeout
        var pids: [Int32?] = []
        pids.reserveCapacity(cookies.count)
        for cookie in cookies {
            guard let raw = try self.reply(to: cookie, deadline: deadline) else {
                pids.append(nil)
                continue
            }
            defer { free(raw) }
            let reply = raw.assumingMemoryBound(to: xcb_res_query_client_ids_reply_t.self)
            var pid: Int32?
            var ids = xcb_res_query_client_ids_ids_iterator(reply)
            while ids.rem > 0, let id = ids.data {
                if id.pointee.spec.mask & XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue != 0,
                    xcb_res_client_id_value_value_length(id) >= 1, let value = xcb_res_client_id_value_value(id)
                {
                    pid = Int32(exactly: value.pointee).flatMap { $0 > 0 ? $0 : nil }
                }
                xcb_res_client_id_value_next(&ids)
            }
            pids.append(pid)
        }
        return pids
    }

    // MARK: Answers

    /// The answer to request `sequence` (to be freed), waiting until `deadline` at most; `nil` when the server
    /// answered with an error (a window gone meanwhile).
    private func reply(to sequence: UInt32, deadline: ContinuousClock.Instant) throws(X11Error) -> UnsafeMutableRawPointer? {
        try Self.reply(self.connection, to: sequence, deadline: deadline, display: self.display, timeout: self.timeout)
    }

    private static func reply(
        _ connection: OpaquePointer, to sequence: UInt32, deadline: ContinuousClock.Instant, display: String,
        timeout: Duration
    ) throws(X11Error) -> UnsafeMutableRawPointer? {
        xcb_flush(connection)
        while true {
            var reply: UnsafeMutableRawPointer?
            var error: UnsafeMutablePointer<xcb_generic_error_t>?
            if xcb_poll_for_reply(connection, sequence, &reply, &error) != 0 {
                free(error)
                let code = xcb_connection_has_error(connection)
                if reply == nil, code != 0 { throw X11Error.connection(code: code, display: display, opening: false) }
                return reply
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw X11Error.timedOut(display: display, after: timeout) }
            var entry = pollfd(fd: xcb_get_file_descriptor(connection), events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            // EINTR and readiness alike: look for the answer again.
            _ = poll(&entry, 1, milliseconds)
        }
    }

    private func check() throws(X11Error) {
        let code = xcb_connection_has_error(self.connection)
        if code != 0 { throw X11Error.connection(code: code, display: self.display, opening: false) }
    }

    /// EWMH's atoms through xcb-ewmh's list, and ICCCM's WM_STATE, which has no number of its own.
    private static func internAtoms(
        _ connection: OpaquePointer, display: String, timeout: Duration
    ) throws(X11Error) -> X11Atoms {
        var ewmh = xcb_ewmh_connection_t()
        // The cookies are freed by xcb_ewmh_init_atoms_replies, and the answers waited for without a deadline: this
        // runs once, before the follower watches for SIGTERM, which still ends it meanwhile.
        let cookies = xcb_ewmh_init_atoms(connection, &ewmh)
        let wmState = xcb_intern_atom(connection, 0, 8, "WM_STATE").sequence
        guard xcb_ewmh_init_atoms_replies(&ewmh, cookies, nil) != 0 else {
            let code = xcb_connection_has_error(connection)
            throw code != 0
                ? X11Error.connection(code: code, display: display, opening: true)
                : X11Error(
                    .cannotConnect, display: display, "cannot open the X display \(display): it did not name EWMH's atoms"
                )
        }
        defer { xcb_ewmh_connection_wipe(&ewmh) }
        let deadline = ContinuousClock.now + timeout
        guard let raw = try Self.reply(connection, to: wmState, deadline: deadline, display: display, timeout: timeout) else {
            throw X11Error(.cannotConnect, display: display, "cannot open the X display \(display): it did not name WM_STATE")
        }
        defer { free(raw) }
        return X11Atoms(
            netActiveWindow: ewmh._NET_ACTIVE_WINDOW,
            netClientList: ewmh._NET_CLIENT_LIST,
            netCurrentDesktop: ewmh._NET_CURRENT_DESKTOP,
            netSupportingWMCheck: ewmh._NET_SUPPORTING_WM_CHECK,
            netWMState: ewmh._NET_WM_STATE,
            netWMStateHidden: ewmh._NET_WM_STATE_HIDDEN,
            netWMDesktop: ewmh._NET_WM_DESKTOP,
            netWMName: ewmh._NET_WM_NAME,
            netWMPID: ewmh._NET_WM_PID,
            utf8String: ewmh.UTF8_STRING,
            wmState: raw.assumingMemoryBound(to: xcb_intern_atom_reply_t.self).pointee.atom
        )
    }

    /// Whether the server has X-Resource 1.2 (QueryClientIds) or later.
    private static func resourceVersion(
        _ connection: OpaquePointer, display: String, timeout: Duration
    ) throws(X11Error) -> Bool {
        guard let extensionData = coalesced_xcb_res_extension(connection), extensionData.pointee.present != 0 else {
            return false
        }
        let cookie = xcb_res_query_version(connection, 1, 2).sequence
        let deadline = ContinuousClock.now + timeout
        guard let raw = try Self.reply(connection, to: cookie, deadline: deadline, display: display, timeout: timeout) else {
            return false
        }
        defer { free(raw) }
        let version = raw.assumingMemoryBound(to: xcb_res_query_version_reply_t.self).pointee
        return version.server_major > 1 || (version.server_major == 1 && version.server_minor >= 2)
    }
}
