import CoalesceCore
import CoalesceWire
import Varlink

/// What an app declares about itself when it registers: the parameters of `io.coalesced.App.Register`.
public struct AppDeclaration: Sendable, Hashable {
    /// Reverse-DNS, such as `org.example.mail`.
    public var name: String
    /// Background modes (audio, voip, …): with any, the app is not suspended in the background.
    public var backgroundModes: [String]
    /// Instead of being suspended the app is told willTerminate and terminated.
    public var exitsOnSuspend: Bool
    /// A systemd service that launches the app; only an administrator may set one.
    public var launchUnit: String?
    /// How the app is kept from running code while it is suspended; `nil` keeps what it declared before (for a new
    /// app: the daemon's configuration, which freezes or stops it unless an operator chose otherwise).
    public var suspension: Suspension?
    /// How each event kind is held while the app is suspended; kinds not named are `latest`.
    /// `nil` keeps what the app declared before; `[:]` clears it.
    public var kinds: [String: KindDeclaration]?
    /// Who may post to the app besides its own user and root; `nil` keeps what it declared before.
    public var posters: Posters?
    /// Topics the app subscribes to; `nil` keeps what it declared before.
    public var topics: [String]?
    /// The app ids its windows carry besides its name (a desktop file's id, a Wayland app_id, an X11 WM_CLASS
    /// class), so that they are its scenes; `nil` keeps what it declared before.
    public var windowIDs: [String]?
    /// The URL schemes the app opens (``CoalescedApp/open(_:type:with:background:)``, `coalescectl open`), without
    /// the colon; `nil` keeps what it declared before.
    public var urlSchemes: [String]?
    /// The MIME types of the documents it opens (`image/*` for every image type); `nil` keeps what it declared
    /// before.
    public var mimeTypes: [String]?

    public init(
        name: String,
        backgroundModes: [String] = [],
        exitsOnSuspend: Bool = false,
        launchUnit: String? = nil,
        suspension: Suspension? = nil,
        kinds: [String: KindDeclaration]? = nil,
        posters: Posters? = nil,
        topics: [String]? = nil,
        windowIDs: [String]? = nil,
        urlSchemes: [String]? = nil,
        mimeTypes: [String]? = nil
    ) {
        self.name = name
        self.backgroundModes = backgroundModes
        self.exitsOnSuspend = exitsOnSuspend
        self.launchUnit = launchUnit
        self.suspension = suspension
        self.kinds = kinds
        self.posters = posters
        self.topics = topics
        self.windowIDs = windowIDs
        self.urlSchemes = urlSchemes
        self.mimeTypes = mimeTypes
    }

    /// Register's parameters.
    var registerParameters: JSONObject {
        var parameters: JSONObject = [
            "name": .string(self.name),
            "backgroundModes": .array(self.backgroundModes.map { .string($0) }),
            "exitsOnSuspend": .bool(self.exitsOnSuspend),
            "launchUnit": self.launchUnit.map { .string($0) } ?? .null,
        ]
        if let suspension = self.suspension { parameters["suspension"] = .string(suspension.rawValue) }
        if let kinds = self.kinds {
            parameters["kinds"] = .object(JSONObject(kinds.sorted { $0.key < $1.key }.map { ($0.key, $0.value.wire) }))
        }
        if let posters = self.posters { parameters["posters"] = posters.wire }
        if let topics = self.topics { parameters["topics"] = .array(topics.map { .string($0) }) }
        if let windowIDs = self.windowIDs { parameters["windowIds"] = .array(windowIDs.map { .string($0) }) }
        if let schemes = self.urlSchemes { parameters["urlSchemes"] = .array(schemes.map { .string($0) }) }
        if let types = self.mimeTypes { parameters["mimeTypes"] = .array(types.map { .string($0) }) }
        return parameters
    }
}

extension AppDeclaration {
    /// How a suspended app is kept from running code: `freeze` (the daemon's default: its launch unit frozen by
    /// systemd's cgroup freezer when its process runs in it, its process stopped otherwise), `stop` (its process
    /// stopped with SIGSTOP) or `cooperative` (nothing done to its process: it is trusted to run no code while
    /// suspended, as an app that must keep a connection alive, or one under a debugger).
    public typealias Suspension = SuspensionMode
}
