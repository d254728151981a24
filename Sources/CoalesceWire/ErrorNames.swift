public import Varlink

/// A parameter of the App, Notifications, Screen and System interfaces' errors, by the name their files give it.
public enum ErrorParameter: String, Sendable, Hashable, CaseIterable {
    case action, app, apps, bound, count, failed, field, id, index, kind, limit, mode, name, next, parameter, pending, quota,
        reason, seq, scene, size, state, target, timeoutSec, topic, uid, unit, url, watch

    /// An error's parameters as a reply carries them; a member whose value is `nil` (an optional parameter not
    /// given) is left out.
    public static func object(_ members: KeyValuePairs<ErrorParameter, JSONValue?>) -> JSONObject {
        JSONObject(members.compactMap { parameter, value in value.map { (parameter.rawValue, $0) } })
    }
}

/// The errors of `io.coalesced.App`, each with its parameters, as its interface file declares them: the daemon
/// names the errors it sends here, and the client library the errors it reads (ClientErrorTests checks the list
/// against the file).
public enum AppErrorName: String, InterfaceErrorName, Sendable, Hashable, CaseIterable {
    case invalidAppName = "InvalidAppName"
    case notOwner = "NotOwner"
    case tooManyApps = "TooManyApps"
    case notRegistered = "NotRegistered"
    case wrongState = "WrongState"
    case noSuchTask = "NoSuchTask"
    case tooManyTasks = "TooManyTasks"
    case launchUnitNotAllowed = "LaunchUnitNotAllowed"
    case backgroundModeNotDeclared = "BackgroundModeNotDeclared"
    case stateTooLarge = "StateTooLarge"
    case replaced = "Replaced"
    case unknownTarget = "UnknownTarget"
    case invalidKind = "InvalidKind"
    case invalidPolicy = "InvalidPolicy"
    case invalidTopic = "InvalidTopic"
    case invalidPosters = "InvalidPosters"
    case invalidBackgroundMode = "InvalidBackgroundMode"
    case invalidLaunchUnit = "InvalidLaunchUnit"
    case tooManyDeclared = "TooManyDeclared"
    case notAllowedToPost = "NotAllowedToPost"
    case tooManyKinds = "TooManyKinds"
    case notANumber = "NotANumber"
    case payloadTooLarge = "PayloadTooLarge"
    case storageFailed = "StorageFailed"
    case quotaExceeded = "QuotaExceeded"
    case sequenceNotSent = "SequenceNotSent"
    case noHandler = "NoHandler"
    case ambiguousHandler = "AmbiguousHandler"
    case launchesHeld = "LaunchesHeld"
    case invalidRefresh = "InvalidRefresh"
    case tooManyRefreshes = "TooManyRefreshes"
    case noSuchRefresh = "NoSuchRefresh"
    case refreshNotRunning = "RefreshNotRunning"

    public static let interface = "io.coalesced.App"

    /// Its parameters, in the order the interface file declares them.
    public var parameters: [ErrorParameter] {
        switch self {
        case .invalidAppName: [.name, .reason]
        case .notOwner, .notRegistered, .replaced: [.app]
        case .tooManyApps: [.limit]
        case .wrongState: [.app, .state, .reason]
        case .noSuchTask: [.app, .id]
        case .tooManyTasks: [.app, .limit]
        case .launchUnitNotAllowed: [.app, .unit]
        case .backgroundModeNotDeclared: [.app, .kind, .mode]
        case .stateTooLarge: [.app, .size, .limit]
        case .unknownTarget, .notAllowedToPost: [.target]
        case .invalidKind, .invalidPolicy: [.kind, .reason]
        case .invalidTopic: [.topic, .reason]
        case .invalidPosters, .storageFailed: [.reason]
        case .invalidBackgroundMode: [.mode, .reason]
        case .invalidLaunchUnit: [.unit, .reason]
        case .tooManyDeclared: [.parameter, .count, .limit]
        case .tooManyKinds: [.target, .limit]
        case .notANumber: [.target, .kind, .field]
        case .payloadTooLarge: [.size, .limit]
        case .quotaExceeded: [.quota, .limit, .uid]
        case .sequenceNotSent: [.app, .seq, .next]
        case .noHandler: [.url, .reason]
        case .ambiguousHandler: [.url, .apps]
        case .launchesHeld: [.app, .failed]
        case .invalidRefresh: [.app, .id, .reason]
        case .tooManyRefreshes: [.app, .limit]
        case .noSuchRefresh, .refreshNotRunning: [.app, .id]
        }
    }
}

/// The errors of `io.coalesced.Notifications`, each with its parameters, as its interface file declares them, for
/// the daemon and the client library alike.
public enum NotificationErrorName: String, InterfaceErrorName, Sendable, Hashable, CaseIterable {
    case unknownApp = "UnknownApp"
    case notAllowed = "NotAllowed"
    case invalidRequest = "InvalidRequest"
    case pendingLimit = "PendingLimit"
    case quotaExceeded = "QuotaExceeded"
    case unknownNotification = "UnknownNotification"
    case unknownAction = "UnknownAction"
    case storageFailed = "StorageFailed"
    case agentOverrun = "AgentOverrun"

    public static let interface = "io.coalesced.Notifications"

    /// Its parameters, in the order the interface file declares them.
    public var parameters: [ErrorParameter] {
        switch self {
        case .unknownApp, .notAllowed: [.app]
        case .invalidRequest: [.app, .id, .reason]
        case .pendingLimit: [.app, .limit, .pending]
        case .quotaExceeded: [.quota, .limit, .uid]
        case .unknownNotification: [.app, .id]
        case .unknownAction: [.app, .id, .action]
        case .storageFailed: [.reason]
        case .agentOverrun: [.limit]
        }
    }
}

/// The errors of `io.coalesced.System`, each with its parameters, as its interface file declares them: the daemon
/// names the errors it sends here.
public enum SystemErrorName: String, InterfaceErrorName, Sendable, Hashable, CaseIterable {
    case invalidWatch = "InvalidWatch"
    case noSuchWatch = "NoSuchWatch"
    case watchExists = "WatchExists"
    case storageFailed = "StorageFailed"
    case noSuchApp = "NoSuchApp"
    case wrongState = "WrongState"
    case noForegroundApp = "NoForegroundApp"
    case launchTimedOut = "LaunchTimedOut"
    case launchFailed = "LaunchFailed"
    case nothingToPurge = "NothingToPurge"
    case monitorOverrun = "MonitorOverrun"
    case noSuchScene = "NoSuchScene"
    case sceneNotFocusable = "SceneNotFocusable"

    public static let interface = "io.coalesced.System"

    /// Its parameters, in the order the interface file declares them.
    public var parameters: [ErrorParameter] {
        switch self {
        case .invalidWatch, .noSuchWatch: [.watch, .reason]
        case .watchExists: [.watch]
        case .storageFailed: [.reason]
        case .noSuchApp: [.app]
        case .wrongState: [.app, .state, .reason]
        case .noForegroundApp, .nothingToPurge: []
        case .launchTimedOut: [.app, .timeoutSec]
        case .launchFailed: [.app, .unit, .reason]
        case .monitorOverrun: [.bound]
        case .noSuchScene: [.app, .scene]
        case .sceneNotFocusable: [.app, .scene, .reason]
        }
    }
}

/// The errors of `io.coalesced.Screen`, each with its parameters, as its interface file declares them.
public enum ScreenErrorName: String, InterfaceErrorName, Sendable, Hashable, CaseIterable {
    case invalidWindow = "InvalidWindow"

    public static let interface = "io.coalesced.Screen"

    /// Its parameters, in the order the interface file declares them.
    public var parameters: [ErrorParameter] {
        switch self {
        case .invalidWindow: [.index, .reason]
        }
    }
}

/// The interface the daemon's Varlink server names its protocol errors in (`io.coalesced.Protocol.MessageTooLarge`).
/// The errors themselves are the Varlink module's (`VarlinkProtocolError`), which names no product.
public enum ProtocolErrorInterface {
    public static let name = "io.coalesced.Protocol"
}

/// The errors of one interface, by the name they are sent with.
public protocol InterfaceErrorName: RawRepresentable where RawValue == String {
    /// The interface they are declared in: `io.coalesced.App`.
    static var interface: String { get }
}

extension InterfaceErrorName {
    /// The name a reply carries: the interface's, a dot, the error's (`io.coalesced.App.NotOwner`).
    public var qualified: String { Self.interface + "." + self.rawValue }

    /// The error a reply's name stands for; `nil` for a name of another interface, or one this list does not have.
    public init?(qualified: String) {
        let prefix = Self.interface + "."
        guard qualified.hasPrefix(prefix) else { return nil }
        self.init(rawValue: String(qualified.dropFirst(prefix.count)))
    }
}
