import CXcb

/// The atoms a follower of an EWMH window manager reads, by their names' numbers on one server.
public struct X11Atoms: Sendable, Hashable {
    /// The root's focused client window (None when none is).
    public var netActiveWindow: X11ID
    /// The root's list of managed client windows, oldest first.
    public var netClientList: X11ID
    /// The root's desktop on screen.
    public var netCurrentDesktop: X11ID
    /// On the root: set by an EWMH window manager that runs.
    public var netSupportingWMCheck: X11ID
    /// A client's states (atoms), such as ``netWMStateHidden``.
    public var netWMState: X11ID
    /// The state of a minimized client.
    public var netWMStateHidden: X11ID
    /// A client's desktop (0xFFFFFFFF: all of them).
    public var netWMDesktop: X11ID
    /// A client's title, UTF-8.
    public var netWMName: X11ID
    /// The pid a client says it has: anyone on the display may write it, so it proves nothing.
    public var netWMPID: X11ID
    /// The type of UTF-8 text.
    public var utf8String: X11ID
    /// ICCCM's state of a client window: Withdrawn (0), Normal (1) or Iconic (3).
    public var wmState: X11ID

    /// ICCCM's title, of type STRING (Latin-1) or another text type.
    public static let wmName = X11ID(XCB_ATOM_WM_NAME.rawValue)
    /// ICCCM's "instance\0class\0" of a client.
    public static let wmClass = X11ID(XCB_ATOM_WM_CLASS.rawValue)
    /// The type of Latin-1 text.
    public static let string = X11ID(XCB_ATOM_STRING.rawValue)
    public static let cardinal = X11ID(XCB_ATOM_CARDINAL.rawValue)
    public static let window = X11ID(XCB_ATOM_WINDOW.rawValue)
    public static let atom = X11ID(XCB_ATOM_ATOM.rawValue)
    /// A property read of any type.
    public static let anyType: X11ID = 0
}

/// Events a client asks for on a window.
public struct X11EventMask: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// A property of the window changed or was deleted.
    public static let propertyChange = X11EventMask(rawValue: XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue)
    /// The window was mapped, unmapped, destroyed, moved or resized.
    public static let structureNotify = X11EventMask(rawValue: XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue)
}

/// An event the server sent, as far as a follower of windows tells them apart.
public enum X11Event: Sendable, Hashable {
    /// `atom` changed on `window`, or was deleted.
    case propertyChanged(window: X11ID, atom: X11ID)
    case mapped(window: X11ID)
    case unmapped(window: X11ID)
    case destroyed(window: X11ID)
    /// Anything else: another event, or the error of a request whose answer nobody waited for.
    case other

    init(_ event: UnsafeMutablePointer<xcb_generic_event_t>) {
        let raw = UnsafeRawPointer(event)
        // The high bit says the event was sent by a client (SendEvent) rather than the server.
        switch Int32(event.pointee.response_type & 0x7F) {
        case XCB_PROPERTY_NOTIFY:
            let notify = raw.load(as: xcb_property_notify_event_t.self)
            self = .propertyChanged(window: notify.window, atom: notify.atom)
        case XCB_MAP_NOTIFY:
            self = .mapped(window: raw.load(as: xcb_map_notify_event_t.self).window)
        case XCB_UNMAP_NOTIFY:
            self = .unmapped(window: raw.load(as: xcb_unmap_notify_event_t.self).window)
        case XCB_DESTROY_NOTIFY:
            self = .destroyed(window: raw.load(as: xcb_destroy_notify_event_t.self).window)
        default:
            self = .other
        }
    }
}

/// One property to read.
public struct X11PropertyRequest: Sendable, Hashable {
    public var window: X11ID
    public var property: X11ID
    /// The type it must have, or ``X11Atoms/anyType``.
    public var type: X11ID
    /// Read at most this many bytes of its value (rounded up to whole 32-bit units).
    public var maximumBytes: Int

    public init(window: X11ID, property: X11ID, type: X11ID, maximumBytes: Int) {
        self.window = window
        self.property = property
        self.type = type
        self.maximumBytes = max(0, min(maximumBytes, 1 << 20))
    }
}

/// A property's value as read.
public struct X11Property: Sendable, Hashable {
    /// Its type (an atom, such as ``X11Atoms/cardinal``).
    public var type: X11ID
    /// 8, 16 or 32: the size of its items in bits.
    public var format: UInt8
    /// Its value, or its first ``X11PropertyRequest/maximumBytes`` bytes.
    public var bytes: [UInt8]
    /// Whether ``bytes`` is the whole value.
    public var complete: Bool

    public init(type: X11ID, format: UInt8, bytes: [UInt8], complete: Bool) {
        self.type = type
        self.format = format
        self.bytes = bytes
        self.complete = complete
    }

    /// The value's 32-bit items (windows, atoms, cardinals), in the machine's order as xcb delivers them; empty for
    /// a value of another format.
    public var items: [UInt32] {
        guard self.format == 32 else { return [] }
        return stride(from: 0, to: self.bytes.count - 3, by: 4).map { offset in
            self.bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        }
    }
}
