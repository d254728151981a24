import Glibc

/// A failure of the connection to a Wayland compositor, in words that say what to check.
public struct WaylandError: Error, Hashable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// No compositor answers on the display's socket, or it refused the connection.
        case cannotConnect
        /// The compositor does not offer wlr-foreign-toplevel-management: its windows cannot be followed this way.
        case unsupported
        /// The compositor closed the connection: the session is over.
        case closed
        /// The compositor did not answer in time.
        case timedOut
        /// The connection ended for another reason (a protocol error, memory), which the description names.
        case failed
    }

    public var kind: Kind
    /// The display, as `WAYLAND_DISPLAY` names it (`wayland-1`).
    public var display: String
    public var description: String

    init(_ kind: Kind, display: String, _ description: String) {
        self.kind = kind
        self.display = display
        self.description = description
    }

    /// The error a broken connection stands for: `code` is libwayland's `wl_display_get_error`.
    static func lost(code: Int32, display: String, protocolError: String?) -> WaylandError {
        switch code {
        case EPIPE, ECONNRESET:
            return WaylandError(.closed, display: display, "lost the Wayland display \(display): the compositor closed the connection")
        case EPROTO:
            return WaylandError(
                .failed, display: display,
                "lost the Wayland display \(display): the compositor ended the connection for a protocol error"
                    + (protocolError.map { " (\($0))" } ?? "")
            )
        default:
            return WaylandError(.failed, display: display, "lost the Wayland display \(display): \(String(cString: strerror(code)))")
        }
    }
}
