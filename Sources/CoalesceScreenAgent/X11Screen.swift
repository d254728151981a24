/// An X11 session's windows as an EWMH window manager describes them in properties (of the root, and of each client
/// window), read as the windows the agent reports. Values only: ``X11Windows`` reads them from the server.
///
/// A client window of `_NET_CLIENT_LIST` is hidden when it is minimized (`_NET_WM_STATE_HIDDEN`), on a desktop not
/// shown (`_NET_WM_DESKTOP` neither `_NET_CURRENT_DESKTOP` nor all desktops), or iconic (ICCCM's `WM_STATE`, which is
/// how openbox marks a window of another desktop: it sets no `_NET_WM_STATE_HIDDEN` there); otherwise it is focused
/// when it is the active window (`_NET_ACTIVE_WINDOW`, through ``ActiveWindowHold``), and shown. A window that
/// leaves the list is closed: it is no longer in the report.
struct X11Screen: Hashable {
    /// One client window, as its properties read.
    struct Client: Hashable {
        var window: UInt32
        /// The class of its `WM_CLASS` (the second string, after the instance): its app's name. `nil`: it has none.
        var appID: String?
        /// `_NET_WM_NAME`, else `WM_NAME`.
        var title: String
        /// The atoms of its `_NET_WM_STATE`.
        var states: [UInt32] = []
        /// Its `_NET_WM_DESKTOP`.
        var desktop: UInt32?
        /// The state of its ICCCM `WM_STATE`.
        var wmState: UInt32?
        /// The process behind it, as the X server knows it (X-Resource), never `_NET_WM_PID`.
        var pid: Int32?
    }

    /// The windows of `_NET_CLIENT_LIST`, in its order.
    var clients: [Client]
    /// The focused window, `_NET_ACTIVE_WINDOW` as ``ActiveWindowHold`` reports it.
    var active: UInt32?
    /// `_NET_CURRENT_DESKTOP`.
    var currentDesktop: UInt32?
    /// The atom `_NET_WM_STATE_HIDDEN` on this server.
    var hiddenState: UInt32

    /// `_NET_WM_DESKTOP` of a window on every desktop.
    static let allDesktops: UInt32 = 0xFFFF_FFFF
    /// ICCCM `WM_STATE`'s IconicState.
    static let iconic: UInt32 = 3
    /// The daemon takes at most this many windows in a report.
    static let maximumWindows = 1024

    /// The windows to report: each client with an app id the daemon takes, once, at most ``maximumWindows``.
    var windows: [SessionWindow] {
        var windows: [SessionWindow] = []
        var seen: Set<UInt32> = []
        for client in self.clients where windows.count < Self.maximumWindows && seen.insert(client.window).inserted {
            guard let appID = client.appID,
                let window = SessionWindow(
                    id: Self.windowID(client.window),
                    appID: appID,
                    pid: client.pid,
                    presentation: self.presentation(of: client),
                    title: client.title
                )
            else { continue }
            windows.append(window)
        }
        return windows
    }

    func presentation(of client: Client) -> SessionWindow.Presentation {
        let elsewhere = client.desktop.map { desktop in
            desktop != Self.allDesktops && self.currentDesktop.map { desktop != $0 } == true
        } ?? false
        if client.states.contains(self.hiddenState) || elsewhere || client.wmState == Self.iconic { return .hidden }
        return client.window == self.active ? .focused : .shown
    }

    /// A window's id in the report: `0x` and eight hexadecimal digits, as xprop and xdotool's `--hex` write it.
    static func windowID(_ window: UInt32) -> String {
        let digits = String(window, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// The window a reported id names; `nil` for an id ``windowID(_:)`` does not make.
    static func window(id: String) -> UInt32? {
        guard id.hasPrefix("0x"), id.utf8.count == 10 else { return nil }
        return UInt32(id.dropFirst(2), radix: 16)
    }

    // MARK: Reading values

    /// The class in a `WM_CLASS` value (`instance\0class\0`, Latin-1 as ICCCM has it, or UTF-8 where its type says):
    /// `nil` when there is none, or when the value was read only in part (a class cut short would name another app).
    static func appID(wmClass bytes: [UInt8], complete: Bool, utf8: Bool = false) -> String? {
        guard complete else { return nil }
        let strings = bytes.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard strings.count >= 2, !strings[1].isEmpty else { return nil }
        return utf8 ? Self.utf8(Array(strings[1])) : Self.latin1(strings[1])
    }

    /// A window's title: its `_NET_WM_NAME` (UTF-8) when it has one, else its `WM_NAME` (UTF-8 when of type
    /// UTF8_STRING, else taken as Latin-1, ICCCM's STRING); a title cut short is cut where it ends.
    static func title(netWMName: [UInt8]?, wmName: [UInt8]?, wmNameIsUTF8: Bool) -> String {
        if let netWMName, !netWMName.isEmpty { return Self.utf8(netWMName) }
        guard let wmName else { return "" }
        return wmNameIsUTF8 ? Self.utf8(wmName) : Self.latin1(wmName[...])
    }

    /// UTF-8 text up to its first NUL; a sequence that is not UTF-8 becomes U+FFFD.
    static func utf8(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Latin-1 text up to its first NUL: each byte the character of its number.
    static func latin1(_ bytes: ArraySlice<UInt8>) -> String {
        String(String.UnicodeScalarView(bytes.prefix { $0 != 0 }.map { Unicode.Scalar($0) }))
    }
}
