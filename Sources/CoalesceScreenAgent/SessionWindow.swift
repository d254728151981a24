import CoalesceCore
import Varlink

/// One window as the session shows it, in the words of `io.coalesced.Screen`'s `Window`: what the agent reports.
struct SessionWindow: Hashable, Sendable {
    /// Where the window is on screen, for its scene.
    enum Presentation: String, Hashable, Sendable {
        /// Shown and receiving input.
        case focused
        /// Shown, without the focus.
        case shown
        /// Minimized, or on a workspace or desktop that is not shown.
        case hidden
    }

    /// The window's id where it comes from (sway's container id, an X11 window id).
    var id: String
    /// Wayland's app_id, X11's WM_CLASS class: the name of the app it belongs to.
    var appID: String
    /// The process that shows it, as the window system knows it.
    var pid: Int32?
    var presentation: Presentation
    var title: String

    /// The daemon takes titles of at most this many bytes, without control characters.
    static let maximumTitleLength = 1024
    /// …and ids and app ids of 1 to this many bytes.
    static let maximumIDLength = 255

    /// A window for the report, its title made one the daemon takes (control characters become spaces, a long one
    /// is cut at a character's end); `nil` for one whose id or app id cannot be reported.
    init?(id: String, appID: String, pid: Int32?, presentation: Presentation, title: String) {
        guard Self.reportable(id), Self.reportable(appID) else { return nil }
        self.id = id
        self.appID = appID
        self.pid = pid.flatMap { $0 > 0 ? $0 : nil }
        self.presentation = presentation
        self.title = Self.cleaned(title)
    }

    /// `io.coalesced.Screen`'s `Window`.
    var wire: JSONValue {
        var object: JSONObject = [
            "id": .string(self.id), "appId": .string(self.appID), "presentation": .string(self.presentation.rawValue),
            "title": .string(self.title),
        ]
        if let pid = self.pid { object["pid"] = .int(Int64(pid)) }
        return .object(object)
    }

    private static func reportable(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= Self.maximumIDLength && ControlCharacters.first(in: name) == nil
    }

    static func cleaned(_ title: String) -> String {
        var result = ""
        var bytes = 0
        for character in title {
            // The daemon's control characters: U+0000 to U+001F and U+007F.
            let text = character.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } ? " " : String(character)
            bytes += text.utf8.count
            guard bytes <= Self.maximumTitleLength else { break }
            result += text
        }
        return result
    }
}
