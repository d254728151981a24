import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A client of the desktop's notification server (`org.freedesktop.Notifications` on the session bus, the
/// freedesktop Desktop Notifications Specification), over sd-bus.
///
/// Calls block for at most ``callTimeout``: a slow or stuck server costs that long, never more. Signals (a button
/// clicked, a notification closed, the server coming or going) are handed to the callback given at init, from
/// ``process()``: run the connection by polling ``fileDescriptor`` for ``pollEvents`` until ``pollTimeout``, then
/// calling ``process()``. Use it from one thread.
public final class DesktopNotifications {
    /// The server's well-known name, object and interface.
    public static let serverName = "org.freedesktop.Notifications"
    public static let serverPath = "/org/freedesktop/Notifications"

    /// What the server tells its clients.
    public enum Event: Sendable, Hashable {
        /// The user chose an action of notification `id`: `"default"` for a click on its body, or an action key
        /// given to ``notify(appName:replacesID:summary:body:actions:hints:expireTimeout:)``.
        case actionInvoked(id: UInt32, key: String)
        /// Notification `id` is gone from the screen.
        case closed(id: UInt32, reason: CloseReason)
        /// A server took the name (`owner` is its unique bus name): it starts with no notifications of ours.
        case serverAppeared(owner: String)
        /// The server left the bus; the notifications it showed went with it.
        case serverVanished
    }

    /// Why a notification closed, as the specification numbers the reasons (others are kept as they come).
    public struct CloseReason: RawRepresentable, Sendable, Hashable {
        public var rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// It timed out.
        public static let expired = CloseReason(rawValue: 1)
        /// The user dismissed it.
        public static let dismissed = CloseReason(rawValue: 2)
        /// A client called CloseNotification.
        public static let closedByCall = CloseReason(rawValue: 3)
        /// The server does not say.
        public static let undefined = CloseReason(rawValue: 4)
    }

    /// How urgent a notification is, the `urgency` hint.
    public enum Urgency: UInt8, Sendable {
        case low = 0
        case normal = 1
        case critical = 2
    }

    /// A hint's value; the specification's hints are strings, booleans, bytes and integers.
    public enum HintValue: Sendable, Hashable {
        case string(String)
        case boolean(Bool)
        case byte(UInt8)
        case int32(Int32)
    }

    /// How long a call may wait for the server's reply.
    public let callTimeout: Duration

    private let bus: OpaquePointer
    private let onEvent: (Event) -> Void
    /// The unique name that owns ``serverName``, as the bus last said; signals from anyone else are ignored.
    public private(set) var serverOwner: String?

    /// Connects to the session bus: the calling user's (`DBUS_SESSION_BUS_ADDRESS`, or `$XDG_RUNTIME_DIR/bus`), or
    /// the one at `address` (a D-Bus address such as `unix:path=/run/user/1000/bus`).
    /// - Parameters:
    ///   - callTimeout: how long each call waits for the server.
    ///   - onEvent: called from ``process()`` with each signal, as a typed event.
    /// - Throws: ``SystemdError`` when the bus cannot be reached or refuses the signal subscriptions.
    public init(
        address: String? = nil,
        callTimeout: Duration = .seconds(2),
        onEvent: @escaping (Event) -> Void
    ) throws(SystemdError) {
        var bus: OpaquePointer?
        if let address {
            try SystemdError.check(sd_bus_new(&bus), "create a D-Bus connection")
            do {
                try SystemdError.check(sd_bus_set_address(bus, address), "use the D-Bus address \(address)")
                try SystemdError.check(sd_bus_set_bus_client(bus, 1), "set up the D-Bus connection")
                try SystemdError.check(sd_bus_start(bus), "connect to the session bus at \(address)")
            } catch {
                sd_bus_flush_close_unref(bus)
                throw error
            }
        } else {
            let result = sd_bus_open_user(&bus)
            guard result >= 0 else {
                throw SystemdError(
                    operation: "connect to the session bus",
                    errno: -result,
                    busError: "\(String(cString: strerror(-result))); is a graphical session running? "
                        + "DBUS_SESSION_BUS_ADDRESS or XDG_RUNTIME_DIR must name its bus"
                )
            }
        }
        self.bus = bus!  // set on success
        self.callTimeout = callTimeout
        self.onEvent = onEvent
        do {
            try self.subscribe()
            self.serverOwner = try self.currentOwner()
        } catch {
            sd_bus_flush_close_unref(self.bus)
            throw error
        }
    }

    deinit {
        sd_bus_flush_close_unref(self.bus)
    }

    // MARK: Calls

    /// The server's capabilities (GetCapabilities): `actions`, `body`, `persistence`, ...
    /// - Throws: ``SystemdError`` when no server answers within ``callTimeout``.
    public func capabilities() throws(SystemdError) -> [String] {
        let operation = "ask the notification server for its capabilities"
        let message = try self.methodCall("GetCapabilities", operation)
        defer { sd_bus_message_unref(message) }
        let reply = try self.call(message, operation)
        defer { sd_bus_message_unref(reply) }
        var names: [String] = []
        try SystemdError.check(sd_bus_message_enter_container(reply, Self.type("a"), "s"), "read the capabilities")
        while true {
            var value: UnsafePointer<CChar>?
            let result = try SystemdError.check(sd_bus_message_read_basic(reply, Self.type("s"), &value), "read a capability")
            guard result > 0, let value else { break }
            names.append(String(cString: value))
        }
        try SystemdError.check(sd_bus_message_exit_container(reply), "read the capabilities")
        return names
    }

    /// Shows a notification (Notify) and returns the id the server gave it.
    /// - Parameters:
    ///   - replacesID: a notification of ours this one replaces in place, or 0.
    ///   - actions: the buttons as key and label; the key `"default"` is a click on the notification itself. Pass
    ///     none to a server whose ``capabilities()`` lack `actions`.
    ///   - hints: `urgency` (a byte), `category`, vendor hints (`x-...`); the server ignores those it does not know.
    ///   - expireTimeout: milliseconds on screen; -1 the server's default, 0 never expires.
    /// - Throws: ``SystemdError`` when no server answers within ``callTimeout`` or it refuses the notification.
    public func notify(
        appName: String,
        replacesID: UInt32 = 0,
        summary: String,
        body: String,
        actions: [(key: String, label: String)] = [],
        hints: [String: HintValue] = [:],
        expireTimeout: Int32 = -1
    ) throws(SystemdError) -> UInt32 {
        let operation = "show a notification through \(Self.serverName)"
        let message = try self.methodCall("Notify", operation)
        defer { sd_bus_message_unref(message) }
        let build = "build a Notify call"
        try self.append(message, string: appName, build)
        var replaces = replacesID
        try SystemdError.check(sd_bus_message_append_basic(message, Self.type("u"), &replaces), build)
        try self.append(message, string: "", build)  // app_icon
        try self.append(message, string: summary, build)
        try self.append(message, string: body, build)
        try SystemdError.check(sd_bus_message_open_container(message, Self.type("a"), "s"), build)
        for action in actions {
            try self.append(message, string: action.key, build)
            try self.append(message, string: action.label, build)
        }
        try SystemdError.check(sd_bus_message_close_container(message), build)
        try SystemdError.check(sd_bus_message_open_container(message, Self.type("a"), "{sv}"), build)
        for (name, value) in hints.sorted(by: { $0.key < $1.key }) {
            try SystemdError.check(sd_bus_message_open_container(message, Self.type("e"), "sv"), build)
            try self.append(message, string: name, build)
            try self.append(message, variant: value, build)
            try SystemdError.check(sd_bus_message_close_container(message), build)
        }
        try SystemdError.check(sd_bus_message_close_container(message), build)
        var timeout = expireTimeout
        try SystemdError.check(sd_bus_message_append_basic(message, Self.type("i"), &timeout), build)

        let reply = try self.call(message, operation)
        defer { sd_bus_message_unref(reply) }
        var id: UInt32 = 0
        try SystemdError.check(sd_bus_message_read_basic(reply, Self.type("u"), &id), "read the reply to Notify")
        return id
    }

    /// Closes notification `id` (CloseNotification); the server answers with a ``Event/closed(id:reason:)``.
    /// - Throws: ``SystemdError`` when no server answers within ``callTimeout``.
    public func closeNotification(id: UInt32) throws(SystemdError) {
        let operation = "close notification \(id)"
        let message = try self.methodCall("CloseNotification", operation)
        defer { sd_bus_message_unref(message) }
        var value = id
        try SystemdError.check(sd_bus_message_append_basic(message, Self.type("u"), &value), operation)
        sd_bus_message_unref(try self.call(message, operation))
    }

    // MARK: Running

    /// The connection's socket, to poll together with other descriptors.
    public var fileDescriptor: CInt { sd_bus_get_fd(self.bus) }

    /// The poll(2) events to wait for on ``fileDescriptor`` (POLLIN, and POLLOUT while there is output queued).
    public var pollEvents: Int16 { Int16(truncatingIfNeeded: max(0, sd_bus_get_events(self.bus))) }

    /// How long a poll may wait before ``process()`` has something to do anyway (a reply's deadline, say);
    /// `nil` when only the socket can bring work.
    public var pollTimeout: Duration? {
        var deadline: UInt64 = 0
        guard sd_bus_get_timeout(self.bus, &deadline) >= 0, deadline != UInt64.max else { return nil }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        return deadline <= nowMicroseconds ? .zero : .microseconds(deadline - nowMicroseconds)
    }

    /// Reads and dispatches everything the bus has for us, handing signals to the callback; returns whether there
    /// was anything.
    /// - Throws: ``SystemdError`` when the connection to the bus is lost.
    @discardableResult
    public func process() throws(SystemdError) -> Bool {
        var any = false
        while true {
            let result = sd_bus_process(self.bus, nil)
            guard result >= 0 else {
                throw SystemdError(operation: "read from the session bus", errno: -result)
            }
            if result == 0 { return any }
            any = true
        }
    }

    /// Waits at most `timeout` for the bus to have something, then processes it: a loop for a thread that has
    /// nothing else to watch.
    /// - Throws: ``SystemdError`` when the connection to the bus is lost.
    public func wait(_ timeout: Duration) throws(SystemdError) {
        try self.process()
        let result = sd_bus_wait(self.bus, timeout.systemdMicroseconds)
        guard result >= 0 || result == -EINTR else {
            throw SystemdError(operation: "wait on the session bus", errno: -result)
        }
        try self.process()
    }

    // MARK: Private

    private func subscribe() throws(SystemdError) {
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        // Floating slots: the matches live as long as the connection, which this object owns.
        try SystemdError.check(
            sd_bus_match_signal(self.bus, nil, nil, Self.serverPath, Self.serverName, "ActionInvoked", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                Unmanaged<DesktopNotifications>.fromOpaque(userdata).takeUnretainedValue().actionInvoked(message)
                return 0
            }, userdata),
            "subscribe to ActionInvoked of \(Self.serverName)"
        )
        try SystemdError.check(
            sd_bus_match_signal(self.bus, nil, nil, Self.serverPath, Self.serverName, "NotificationClosed", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                Unmanaged<DesktopNotifications>.fromOpaque(userdata).takeUnretainedValue().notificationClosed(message)
                return 0
            }, userdata),
            "subscribe to NotificationClosed of \(Self.serverName)"
        )
        let rule = "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.serverName)'"
        try SystemdError.check(
            sd_bus_add_match(self.bus, nil, rule, { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                Unmanaged<DesktopNotifications>.fromOpaque(userdata).takeUnretainedValue().nameOwnerChanged(message)
                return 0
            }, userdata),
            "watch \(Self.serverName) come and go on the session bus"
        )
    }

    /// Asks the bus who owns the server's name; `nil` when no one does.
    private func currentOwner() throws(SystemdError) -> String? {
        let operation = "ask the session bus who owns \(Self.serverName)"
        var message: OpaquePointer?
        try SystemdError.check(
            sd_bus_message_new_method_call(
                self.bus, &message, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner"
            ),
            operation
        )
        defer { sd_bus_message_unref(message) }
        try self.append(message, string: Self.serverName, operation)
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(self.bus, message, self.callTimeout.systemdMicroseconds, &error, &reply)
        if result < 0 {
            if sd_bus_error_has_name(&error, "org.freedesktop.DBus.Error.NameHasNoOwner") != 0 { return nil }
            throw SystemdError(operation: operation, errno: -result, busError: Self.describe(error))
        }
        defer { sd_bus_message_unref(reply) }
        var owner: UnsafePointer<CChar>?
        try SystemdError.check(sd_bus_message_read_basic(reply, Self.type("s"), &owner), operation)
        return owner.map { String(cString: $0) }
    }

    private func methodCall(_ member: String, _ operation: String) throws(SystemdError) -> OpaquePointer? {
        var message: OpaquePointer?
        try SystemdError.check(
            sd_bus_message_new_method_call(self.bus, &message, Self.serverName, Self.serverPath, Self.serverName, member),
            operation
        )
        return message
    }

    /// Sends a call and waits at most ``callTimeout`` for its reply, which the caller releases.
    private func call(_ message: OpaquePointer?, _ operation: String) throws(SystemdError) -> OpaquePointer? {
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(self.bus, message, self.callTimeout.systemdMicroseconds, &error, &reply)
        guard result >= 0 else {
            throw SystemdError(operation: operation, errno: -result, busError: self.explain(error, errno: -result))
        }
        return reply
    }

    /// What a person can do about a failed call: the D-Bus error as it came, with a hint for the usual causes.
    private func explain(_ error: sd_bus_error, errno code: Int32) -> String? {
        let seconds = self.callTimeout.spoken
        var copy = error
        if sd_bus_error_has_name(&copy, "org.freedesktop.DBus.Error.ServiceUnknown") != 0
            || sd_bus_error_has_name(&copy, "org.freedesktop.DBus.Error.NameHasNoOwner") != 0
        {
            return "no notification server runs on the session bus (\(Self.describe(error) ?? "no owner")); "
                + "start the desktop's, or one such as dunst or mako"
        }
        if code == ETIMEDOUT || sd_bus_error_has_name(&copy, "org.freedesktop.DBus.Error.NoReply") != 0
            || sd_bus_error_has_name(&copy, "org.freedesktop.DBus.Error.Timeout") != 0
        {
            return "the notification server did not answer within \(seconds); it is stuck or too busy"
        }
        return Self.describe(error)
    }

    private func append(_ message: OpaquePointer?, string: String, _ operation: String) throws(SystemdError) {
        try SystemdError.check(string.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }, operation)
    }

    private func append(_ message: OpaquePointer?, variant value: HintValue, _ operation: String) throws(SystemdError) {
        let result: Int32
        switch value {
        case .string(let string):
            try SystemdError.check(sd_bus_message_open_container(message, Self.type("v"), "s"), operation)
            result = string.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
        case .boolean(let flag):
            try SystemdError.check(sd_bus_message_open_container(message, Self.type("v"), "b"), operation)
            var int: Int32 = flag ? 1 : 0
            result = sd_bus_message_append_basic(message, Self.type("b"), &int)
        case .byte(let byte):
            try SystemdError.check(sd_bus_message_open_container(message, Self.type("v"), "y"), operation)
            var copy = byte
            result = sd_bus_message_append_basic(message, Self.type("y"), &copy)
        case .int32(let int):
            try SystemdError.check(sd_bus_message_open_container(message, Self.type("v"), "i"), operation)
            var copy = int
            result = sd_bus_message_append_basic(message, Self.type("i"), &copy)
        }
        try SystemdError.check(result, operation)
        try SystemdError.check(sd_bus_message_close_container(message), operation)
    }

    /// Whether a signal comes from the server that owns the name now: anyone on the bus may send one.
    private func fromServer(_ message: OpaquePointer) -> Bool {
        guard let sender = sd_bus_message_get_sender(message), let owner = self.serverOwner else { return false }
        return String(cString: sender) == owner
    }

    private func actionInvoked(_ message: OpaquePointer) {
        guard self.fromServer(message) else { return }
        var id: UInt32 = 0
        var key: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, Self.type("u"), &id) > 0,
            sd_bus_message_read_basic(message, Self.type("s"), &key) > 0, let key
        else { return }
        self.onEvent(.actionInvoked(id: id, key: String(cString: key)))
    }

    private func notificationClosed(_ message: OpaquePointer) {
        guard self.fromServer(message) else { return }
        var id: UInt32 = 0
        var reason: UInt32 = 0
        guard sd_bus_message_read_basic(message, Self.type("u"), &id) > 0,
            sd_bus_message_read_basic(message, Self.type("u"), &reason) > 0
        else { return }
        self.onEvent(.closed(id: id, reason: CloseReason(rawValue: reason)))
    }

    private func nameOwnerChanged(_ message: OpaquePointer) {
        var name: UnsafePointer<CChar>?
        var old: UnsafePointer<CChar>?
        var new: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, Self.type("s"), &name) > 0,
            sd_bus_message_read_basic(message, Self.type("s"), &old) > 0,
            sd_bus_message_read_basic(message, Self.type("s"), &new) > 0,
            let name, String(cString: name) == Self.serverName
        else { return }
        let owner = new.map { String(cString: $0) } ?? ""
        if owner.isEmpty {
            self.serverOwner = nil
            self.onEvent(.serverVanished)
        } else {
            self.serverOwner = owner
            self.onEvent(.serverAppeared(owner: owner))
        }
    }

    private static func type(_ code: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: code)) }

    private static func describe(_ error: sd_bus_error) -> String? {
        guard let name = error.name else { return nil }
        let message = error.message.map { String(cString: $0) } ?? ""
        return "\(String(cString: name)): \(message)"
    }
}

extension Duration {
    /// "2 s", "500 ms": a call timeout as a person reads it.
    fileprivate var spoken: String {
        let milliseconds = self.components.seconds * 1000 + self.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
