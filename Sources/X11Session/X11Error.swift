/// A failure of the connection to an X server, in words that say what to check.
public struct X11Error: Error, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Hashable, Sendable {
        /// The display could not be opened.
        case cannotConnect
        /// The server closed the connection, or the connection broke: the X session is over.
        case closed
        /// The server did not answer a request in time.
        case timedOut
        /// The connection ended for another reason (a request too long, memory), which xcb names.
        case failed
    }

    public var kind: Kind
    /// The display, as `DISPLAY` names it (`:0`).
    public var display: String
    public var description: String

    init(_ kind: Kind, display: String, _ description: String) {
        self.kind = kind
        self.display = display
        self.description = description
    }

    /// The error xcb's connection `code` (`xcb_connection_has_error`) stands for, on `display`; `opening`: while it
    /// was being opened.
    static func connection(code: Int32, display: String, opening: Bool) -> X11Error {
        let verb = opening ? "cannot open the X display \(display)" : "lost the X display \(display)"
        switch code {
        case 1 where opening:
            // XCB_CONN_ERROR: no server there, or it refused this client (its authorization).
            return X11Error(
                .cannotConnect, display: display,
                "\(verb): no X server answers there, or it refused this user (check DISPLAY and XAUTHORITY)"
            )
        case 1:
            return X11Error(.closed, display: display, "\(verb): the X server closed the connection")
        case 2:
            return X11Error(.failed, display: display, "\(verb): the server lacks an extension the connection needs")
        case 3:
            return X11Error(.failed, display: display, "\(verb): out of memory")
        case 4:
            return X11Error(.failed, display: display, "\(verb): a request was longer than the server takes")
        case 5:
            return X11Error(
                .cannotConnect, display: display, "\(verb): not a display name (DISPLAY is like :0 or host:0.0)"
            )
        case 6:
            return X11Error(.cannotConnect, display: display, "\(verb): the server has no such screen")
        default:
            return X11Error(opening ? .cannotConnect : .failed, display: display, "\(verb): xcb error \(code)")
        }
    }

    static func timedOut(display: String, after timeout: Duration) -> X11Error {
        X11Error(.timedOut, display: display, "the X server at \(display) did not answer within \(timeout)")
    }
}
