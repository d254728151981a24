// One scene of an app (seed 002): an instance of its user interface, on Linux one of its windows. An app may have
// several, each with its own state; the app's own state follows from theirs (AppScenes).

/// A scene's name within its app: the window's identifier where it comes from (a Wayland toplevel's handle, an X11
/// window id, or what an operator names). The same id connecting again is the same scene restored, and gets back
/// the state the app saved for it.
public struct SceneID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let value: String

    /// At most this many bytes: an id is a window's handle, not a document.
    public static let maximumLength = 255

    public init(_ value: String) throws(SceneIDError) {
        guard !value.isEmpty else { throw .empty }
        guard value.utf8.count <= Self.maximumLength else { throw .tooLong(value.utf8.count) }
        guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .controlCharacter
        }
        self.value = value
    }

    public var description: String { self.value }

    public static func < (lhs: SceneID, rhs: SceneID) -> Bool { lhs.value < rhs.value }
}

/// Why a text is not a scene id.
public enum SceneIDError: Error, Sendable, Hashable, CustomStringConvertible {
    case empty
    case tooLong(Int)
    case controlCharacter

    public var description: String {
        switch self {
        case .empty: "a scene id is not empty"
        case .tooLong(let bytes): "a scene id has at most \(SceneID.maximumLength) bytes, not \(bytes)"
        case .controlCharacter: "a scene id has no control characters"
        }
    }
}

/// Where a scene is in its lifecycle (seed 002). The raw value is the wire name.
public enum SceneState: String, Sendable, Hashable, CaseIterable {
    /// Not connected to the app: before it connects, and once it is disconnected.
    case unattached
    /// On screen, not receiving the user's input: shown beside the focused window, or interrupted.
    case foregroundInactive
    /// On screen and receiving the user's input: the focused window.
    case foregroundActive
    /// Connected and off screen: minimized, or on a workspace that is not shown.
    case background

    /// Whether the scene is on screen.
    public var isForeground: Bool { self == .foregroundInactive || self == .foregroundActive }
}

/// What the screen says of one window: the input that drives its scene.
public enum ScenePresentation: String, Sendable, Hashable, CaseIterable {
    /// Shown and focused: it receives the user's input.
    case focused
    /// Shown without the focus.
    case shown
    /// Not shown: minimized, or on a hidden workspace.
    case hidden
}

/// What follows a scene, told to the app on its stream in order. The raw value is the callback's name; the event
/// kind on the wire is ``kind``.
public enum SceneCallback: String, Sendable, Hashable, CaseIterable {
    /// The scene connects to the app (with its source, and the state the app saved for it if it is restored).
    case willConnect
    case willEnterForeground
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    /// The scene is gone: its window closed.
    case didDisconnect

    /// The event kind that carries this callback: `scene.willConnect`.
    public var kind: String { "scene." + self.rawValue }
}

/// Who reports a scene's window.
public enum SceneSource: String, Sendable, Hashable, CaseIterable {
    /// A Wayland compositor's toplevel (wlr-foreign-toplevel-management).
    case wayland
    /// An X11 window manager's client window (EWMH).
    case x11
    /// An operator's call naming the scene.
    case system
}

/// What a scene connects with: where it comes from, and what the app saved for it when it was last connected.
public struct SceneConnection: Sendable, Hashable {
    public var source: SceneSource
    public var restoredState: String?
    /// The window's title as it connects: how the app tells which of its windows the scene is.
    public var title: String

    public init(source: SceneSource, restoredState: String? = nil, title: String = "") {
        self.source = source
        self.restoredState = restoredState
        self.title = title
    }
}

/// What the shell does after an input to an app's scenes, in order.
public enum SceneEffect: Sendable, Hashable {
    /// Send the callback about `scene` to the app; a willConnect carries its connection.
    case callback(SceneCallback, scene: SceneID, connection: SceneConnection? = nil)
    /// The scene changed state: log it, tell monitors.
    case transition(scene: SceneID, from: SceneState, to: SceneState)
    /// The scenes put the app elsewhere: its lifecycle follows (``AppLifecycle/follow(_:from:reason:now:)``). Toward
    /// the foreground it comes before the scene's step that caused it, away from it after: the app enters the
    /// foreground before its scene does, and leaves it after its last scene has.
    case presence(from: ScenePresence, to: ScenePresence)
}

/// Where an app's scenes put the app: what its lifecycle follows. Ordered from off screen to active.
public enum ScenePresence: String, Sendable, Hashable, Comparable {
    /// A scene is foreground active.
    case active
    /// A scene is on screen, and none active.
    case inactive
    /// No scene is on screen: the app runs in the background, and is suspended by the lifecycle's rules.
    case offScreen

    private var rank: Int {
        switch self {
        case .offScreen: 0
        case .inactive: 1
        case .active: 2
        }
    }

    public static func < (lhs: ScenePresence, rhs: ScenePresence) -> Bool { lhs.rank < rhs.rank }
}

/// One connected scene.
public struct Scene: Sendable, Hashable {
    public let id: SceneID
    public internal(set) var state: SceneState
    /// What the screen last said of its window; the state follows it, save while an interruption lasts.
    public internal(set) var presentation: ScenePresentation
    public let source: SceneSource
    /// The window's title, for people: `coalescectl scenes`.
    public internal(set) var title: String
}
