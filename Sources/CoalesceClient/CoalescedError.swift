import CoalesceWire
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Why a request to coalesced failed: the daemon's errors, with their parameters, and the connection's failures.
///
/// The cases from ``notOwner(app:)`` to ``tooManyDeclared(parameter:count:limit:)`` mirror the errors of the
/// `io.coalesced.App` interface, those from ``unknownApp(app:)`` to ``notificationStorageFailed(reason:)`` the
/// errors of `io.coalesced.Notifications`; an error this library does not know (a later daemon may add some) is
/// ``refused(name:parameters:)``.
public enum CoalescedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Nothing accepts connections at `socketPath`: the daemon is not running, or the path is wrong (the default is
    /// `$COALESCED_SOCKET`, else the system instance's socket). `reason` is the system's.
    case daemonUnreachable(socketPath: String, reason: String)
    /// The connection broke before the daemon answered, or the daemon's reply was not one this library reads.
    case connectionLost(reason: String)
    /// A payload that does not encode to a JSON object, or an event payload that does not decode to the type asked.
    case invalidPayload(kind: String, reason: String)

    /// The name is not reverse-DNS (lower-case labels separated by dots).
    case invalidAppName(name: String, reason: String)
    /// Another user registered this app first.
    case notOwner(app: String)
    /// As many apps are registered as `MaxApps=` allows.
    case tooManyApps(limit: Int)
    /// No app of that name is registered.
    case notRegistered(app: String)
    /// The request does not fit the app's state, for the reason given.
    case wrongState(app: String, state: String, reason: String)
    /// No open background task has this id.
    case noSuchTask(app: String, id: Int)
    /// The app already holds as many background tasks as allowed.
    case tooManyTasks(app: String, limit: Int)
    /// Only an administrator may choose the unit that launches an app.
    case launchUnitNotAllowed(app: String, unit: String)
    /// A kind wakes the app into a background mode the registration does not declare.
    case backgroundModeNotDeclared(app: String, kind: String, mode: String)
    /// The saved state is larger than `MaxSavedState=` allows.
    case stateTooLarge(app: String, size: Int, limit: Int)
    /// Another process attached for this app and took over its stream.
    case replaced(app: String)
    /// No app of that name is registered, or no app subscribes to that topic.
    case unknownTarget(target: String)
    /// The kind does not follow the grammar, for the reason given.
    case invalidKind(kind: String, reason: String)
    /// The caller is not the app's user, root, or one of its declared posters.
    case notAllowedToPost(target: String)
    /// The app already holds `MaxKindsPerApp=` kinds.
    case tooManyKinds(target: String, limit: Int)
    /// The kind sums a member this payload has no number in.
    case notANumber(target: String, kind: String, field: String)
    /// The payload is larger than `MaxPayloadSize=`.
    case payloadTooLarge(size: Int, limit: Int)
    /// The daemon could not keep what it was given; nothing was changed.
    case storageFailed(reason: String)
    /// A quota of the daemon's `[Quotas]` would be passed: `quota` names the setting, `limit` is its value, `uid`
    /// the user it bounds (none for `HeldBytes`). Nothing was changed.
    case quotaExceeded(quota: String, limit: Int, uid: Int?)
    /// An acknowledgement named a number the app was not sent; `next` is the one its next callback carries.
    case sequenceNotSent(app: String, seq: Int, next: Int)
    /// Open: no app of the user's opens the URL (or the one named does not), and what was looked for.
    case noHandler(url: String, reason: String)
    /// Open: several apps open the URL; name one.
    case ambiguousHandler(url: String, apps: [String])
    /// Open: the app would be launched, but its last `failed` launches ended before it finished launching.
    case launchesHeld(app: String, failed: Int)
    /// ScheduleRefresh: the request is not one the daemon takes, and why (a budget or period past its limits).
    case invalidRefresh(app: String, id: String, reason: String)
    /// ScheduleRefresh: the app has as many refreshes scheduled as the daemon allows.
    case tooManyRefreshes(app: String, limit: Int)
    /// The app has no refresh of that id.
    case noSuchRefresh(app: String, id: String)
    /// RefreshDone for a refresh that is not running.
    case refreshNotRunning(app: String, id: String)
    /// A coalescing policy that is not one, for the reason given (a kind's declaration, or a post's policy).
    case invalidPolicy(kind: String, reason: String)
    /// A topic name that does not follow the grammar.
    case invalidTopic(topic: String, reason: String)
    /// Posters that name a group or user that does not exist.
    case invalidPosters(reason: String)
    /// A background mode that is not a mode's name.
    case invalidBackgroundMode(mode: String, reason: String)
    /// A launch unit that is not a service's name.
    case invalidLaunchUnit(unit: String, reason: String)
    /// More kinds, topics or background modes declared than allowed.
    case tooManyDeclared(parameter: String, count: Int, limit: Int)
    /// Notifications: no app of that name is registered.
    case unknownApp(app: String)
    /// Notifications: the caller is not the app's user nor an administrator.
    case notAllowed(app: String)
    /// Notifications: the request is not valid, for the reason given (an unknown time zone, a calendar that matches
    /// no date, a repeating interval under 60 seconds, too many actions…).
    case invalidRequest(app: String, id: String, reason: String)
    /// Notifications: the app has as many requests pending as `PendingLimit=` allows (`limit`); `pending` is how many
    /// it has. None was scheduled.
    case pendingLimit(app: String, limit: Int, pending: Int)
    /// Notifications: no request of this id was presented to the app.
    case unknownNotification(app: String, id: String)
    /// Notifications: the action is not `default`, `dismiss` or one of the presentation's actions.
    case unknownAction(app: String, id: String, action: String)
    /// Notifications: the daemon could not keep the change; nothing changed.
    case notificationStorageFailed(reason: String)
    /// Notifications: a presentation agent left more than `limit` bytes unread, and its stream was ended.
    case agentOverrun(limit: Int)
    /// Notifications: the request would take the app's owner past a quota of `[Quotas]` (`uid` the owner's, `nil`
    /// for the daemon's `HeldBytes`); pending requests and delivered entries count there with events. Nothing was
    /// scheduled.
    case notificationQuotaExceeded(quota: String, limit: Int, uid: Int?)
    /// A parameter is missing, of the wrong type or out of range (`org.varlink.service.InvalidParameter`).
    case invalidParameter(parameter: String, reason: String?)
    /// Any other error the daemon replied: its Varlink name, such as `org.varlink.service.PermissionDenied`, and
    /// its parameters as JSON text.
    case refused(name: String, parameters: String)

    public var description: String {
        switch self {
        case .daemonUnreachable(let path, let reason):
            return "coalesced is not reachable at \(path): \(reason) (is the daemon running? $COALESCED_SOCKET chooses another socket)"
        case .connectionLost(let reason): return "the connection to coalesced was lost: \(reason)"
        case .invalidPayload(let kind, let reason): return "payload of \(kind): \(reason)"
        case .invalidAppName(let name, let reason): return "'\(name)' is not an app name: \(reason)"
        case .notOwner(let app): return "\(app) belongs to another user"
        case .tooManyApps(let limit): return "as many apps are registered as MaxApps= allows (\(limit))"
        case .notRegistered(let app): return "\(app) is not registered"
        case .wrongState(let app, let state, let reason): return "\(app) is \(state): \(reason)"
        case .noSuchTask(let app, let id): return "\(app) has no open background task \(id)"
        case .tooManyTasks(let app, let limit): return "\(app) already holds \(limit) background tasks"
        case .launchUnitNotAllowed(let app, let unit):
            return "only an administrator may make \(unit) the launch unit of \(app)"
        case .backgroundModeNotDeclared(let app, let kind, let mode):
            return "kind \(kind) of \(app) wakes it into background mode \(mode), which it does not declare"
        case .stateTooLarge(let app, let size, let limit):
            return "the state of \(app) is \(size) bytes; MaxSavedState= allows \(limit)"
        case .replaced(let app): return "another process attached for \(app)"
        case .unknownTarget(let target): return "no app or topic \(target)"
        case .invalidKind(let kind, let reason): return "'\(kind)' is not an event kind: \(reason)"
        case .notAllowedToPost(let target): return "not allowed to post to \(target)"
        case .tooManyKinds(let target, let limit): return "\(target) already holds \(limit) kinds"
        case .notANumber(let target, let kind, let field):
            return "kind \(kind) of \(target) sums \(field), and the payload has no number there"
        case .payloadTooLarge(let size, let limit): return "the payload is \(size) bytes; MaxPayloadSize= allows \(limit)"
        case .storageFailed(let reason): return "coalesced could not store it: \(reason)"
        case .quotaExceeded(let quota, let limit, let uid):
            return "quota \(quota) (\(limit)) would be passed" + (uid.map { " for uid \($0)" } ?? "")
        case .sequenceNotSent(let app, let seq, let next):
            return "\(app) was not sent \(seq); its next number is \(next)"
        case .noHandler(_, let reason): return "no app opens the URL: \(reason)"
        case .ambiguousHandler(_, let apps): return "several apps open the URL (\(apps.joined(separator: ", "))): name one"
        case .launchesHeld(let app, let failed):
            return "\(app)'s last \(failed) launches failed; an operator must launch it (coalescectl launch \(app))"
        case .invalidRefresh(let app, let id, let reason): return "refresh \(id) of \(app): \(reason)"
        case .tooManyRefreshes(let app, let limit): return "\(app) has \(limit) refreshes scheduled, as many as allowed"
        case .noSuchRefresh(let app, let id): return "\(app) has no refresh \(id)"
        case .refreshNotRunning(let app, let id): return "refresh \(id) of \(app) is not running"
        case .invalidPolicy(let kind, let reason): return "the policy of \(kind): \(reason)"
        case .invalidTopic(let topic, let reason): return "'\(topic)' is not a topic: \(reason)"
        case .invalidPosters(let reason): return "posters: \(reason)"
        case .invalidBackgroundMode(let mode, let reason): return "'\(mode)' is not a background mode: \(reason)"
        case .invalidLaunchUnit(let unit, let reason): return "'\(unit)' is not a launch unit: \(reason)"
        case .tooManyDeclared(let parameter, let count, let limit):
            return "\(count) \(parameter) declared; at most \(limit) are allowed"
        case .unknownApp(let app): return "no app \(app) is registered"
        case .notAllowed(let app): return "not allowed to manage the notifications of \(app)"
        case .invalidRequest(let app, let id, let reason): return "notification \(id) of \(app): \(reason)"
        case .pendingLimit(let app, let limit, let pending):
            return "\(app) has \(pending) notifications pending; PendingLimit= allows \(limit)"
        case .unknownNotification(let app, let id): return "\(app) was presented no notification \(id)"
        case .unknownAction(let app, let id, let action):
            return "'\(action)' is not default, dismiss or an action of notification \(id) of \(app)"
        case .notificationStorageFailed(let reason): return "coalesced could not store the notification change: \(reason)"
        case .agentOverrun(let limit): return "the presentation agent left more than \(limit) bytes unread and was ended"
        case .notificationQuotaExceeded(let quota, let limit, let uid):
            return "the notification would pass \(quota)=\(limit)" + (uid.map { " of uid \($0)" } ?? "")
        case .invalidParameter(let parameter, let reason):
            return "invalid parameter \(parameter)" + (reason.map { ": \($0)" } ?? "")
        case .refused(let name, let parameters): return parameters == "{}" ? name : "\(name) \(parameters)"
        }
    }

    /// The Varlink name of the daemon's error, such as `io.coalesced.App.NotOwner`; `nil` for a failure of the
    /// connection or of a payload, which the library itself found.
    public var daemonErrorName: String? {
        switch self {
        case .daemonUnreachable, .connectionLost, .invalidPayload: return nil
        case .invalidAppName: return AppErrorName.invalidAppName.qualified
        case .notOwner: return AppErrorName.notOwner.qualified
        case .tooManyApps: return AppErrorName.tooManyApps.qualified
        case .notRegistered: return AppErrorName.notRegistered.qualified
        case .wrongState: return AppErrorName.wrongState.qualified
        case .noSuchTask: return AppErrorName.noSuchTask.qualified
        case .tooManyTasks: return AppErrorName.tooManyTasks.qualified
        case .launchUnitNotAllowed: return AppErrorName.launchUnitNotAllowed.qualified
        case .backgroundModeNotDeclared: return AppErrorName.backgroundModeNotDeclared.qualified
        case .stateTooLarge: return AppErrorName.stateTooLarge.qualified
        case .replaced: return AppErrorName.replaced.qualified
        case .unknownTarget: return AppErrorName.unknownTarget.qualified
        case .invalidKind: return AppErrorName.invalidKind.qualified
        case .notAllowedToPost: return AppErrorName.notAllowedToPost.qualified
        case .tooManyKinds: return AppErrorName.tooManyKinds.qualified
        case .notANumber: return AppErrorName.notANumber.qualified
        case .payloadTooLarge: return AppErrorName.payloadTooLarge.qualified
        case .storageFailed: return AppErrorName.storageFailed.qualified
        case .quotaExceeded: return AppErrorName.quotaExceeded.qualified
        case .sequenceNotSent: return AppErrorName.sequenceNotSent.qualified
        case .noHandler: return AppErrorName.noHandler.qualified
        case .ambiguousHandler: return AppErrorName.ambiguousHandler.qualified
        case .launchesHeld: return AppErrorName.launchesHeld.qualified
        case .invalidRefresh: return AppErrorName.invalidRefresh.qualified
        case .tooManyRefreshes: return AppErrorName.tooManyRefreshes.qualified
        case .noSuchRefresh: return AppErrorName.noSuchRefresh.qualified
        case .refreshNotRunning: return AppErrorName.refreshNotRunning.qualified
        case .invalidPolicy: return AppErrorName.invalidPolicy.qualified
        case .invalidTopic: return AppErrorName.invalidTopic.qualified
        case .invalidPosters: return AppErrorName.invalidPosters.qualified
        case .invalidBackgroundMode: return AppErrorName.invalidBackgroundMode.qualified
        case .invalidLaunchUnit: return AppErrorName.invalidLaunchUnit.qualified
        case .tooManyDeclared: return AppErrorName.tooManyDeclared.qualified
        case .unknownApp: return NotificationErrorName.unknownApp.qualified
        case .notAllowed: return NotificationErrorName.notAllowed.qualified
        case .invalidRequest: return NotificationErrorName.invalidRequest.qualified
        case .pendingLimit: return NotificationErrorName.pendingLimit.qualified
        case .unknownNotification: return NotificationErrorName.unknownNotification.qualified
        case .unknownAction: return NotificationErrorName.unknownAction.qualified
        case .notificationStorageFailed: return NotificationErrorName.storageFailed.qualified
        case .agentOverrun: return NotificationErrorName.agentOverrun.qualified
        case .notificationQuotaExceeded: return NotificationErrorName.quotaExceeded.qualified
        case .invalidParameter: return "org.varlink.service.InvalidParameter"
        case .refused(let name, _): return name
        }
    }

    /// The error a Varlink error reply stands for.
    init(_ error: VarlinkError) {
        self = Self.known(error.varlinkName, error.varlinkParameters)
            ?? .refused(name: error.varlinkName, parameters: JSONValue.object(error.varlinkParameters).jsonText)
    }

    /// The error a client failure stands for.
    init(_ error: VarlinkClientError) {
        switch error {
        case .cannotConnect(let path, let code): self = .daemonUnreachable(socketPath: path, reason: String(cString: strerror(code)))
        case .connectionLost(let reason): self = .connectionLost(reason: reason)
        case .protocolViolation(let reason): self = .connectionLost(reason: "not a Varlink reply: \(reason)")
        }
    }

    /// A known error with the parameters its interface declares; `nil` for another name or missing parameters.
    private static func known(_ name: String, _ parameters: JSONObject) -> CoalescedError? {
        if name == "org.varlink.service.InvalidParameter", let parameter = parameters["parameter"]?.stringValue {
            return .invalidParameter(parameter: parameter, reason: parameters["reason"]?.stringValue)
        }
        if let error = NotificationErrorName(qualified: name) { return Self.known(error, parameters) }
        guard let error = AppErrorName(qualified: name) else { return nil }
        func string(_ key: ErrorParameter) -> String? { parameters[key.rawValue]?.stringValue }
        func int(_ key: ErrorParameter) -> Int? { parameters[key.rawValue]?.intValue.map { Int($0) } }
        switch error {
        case .invalidAppName: return string(.name).map { .invalidAppName(name: $0, reason: string(.reason) ?? "") }
        case .notOwner: return string(.app).map { .notOwner(app: $0) }
        case .tooManyApps: return int(.limit).map { .tooManyApps(limit: $0) }
        case .notRegistered: return string(.app).map { .notRegistered(app: $0) }
        case .wrongState:
            guard let app = string(.app), let state = string(.state) else { return nil }
            return .wrongState(app: app, state: state, reason: string(.reason) ?? "")
        case .noSuchTask:
            guard let app = string(.app), let id = int(.id) else { return nil }
            return .noSuchTask(app: app, id: id)
        case .tooManyTasks:
            guard let app = string(.app), let limit = int(.limit) else { return nil }
            return .tooManyTasks(app: app, limit: limit)
        case .launchUnitNotAllowed:
            guard let app = string(.app), let unit = string(.unit) else { return nil }
            return .launchUnitNotAllowed(app: app, unit: unit)
        case .backgroundModeNotDeclared:
            guard let app = string(.app), let kind = string(.kind), let mode = string(.mode) else { return nil }
            return .backgroundModeNotDeclared(app: app, kind: kind, mode: mode)
        case .stateTooLarge:
            guard let app = string(.app), let size = int(.size), let limit = int(.limit) else { return nil }
            return .stateTooLarge(app: app, size: size, limit: limit)
        case .replaced: return string(.app).map { .replaced(app: $0) }
        case .unknownTarget: return string(.target).map { .unknownTarget(target: $0) }
        case .invalidKind: return string(.kind).map { .invalidKind(kind: $0, reason: string(.reason) ?? "") }
        case .invalidPolicy: return string(.kind).map { .invalidPolicy(kind: $0, reason: string(.reason) ?? "") }
        case .invalidTopic: return string(.topic).map { .invalidTopic(topic: $0, reason: string(.reason) ?? "") }
        case .invalidPosters: return .invalidPosters(reason: string(.reason) ?? "")
        case .invalidBackgroundMode:
            return string(.mode).map { .invalidBackgroundMode(mode: $0, reason: string(.reason) ?? "") }
        case .invalidLaunchUnit: return string(.unit).map { .invalidLaunchUnit(unit: $0, reason: string(.reason) ?? "") }
        case .tooManyDeclared:
            guard let parameter = string(.parameter), let count = int(.count), let limit = int(.limit) else { return nil }
            return .tooManyDeclared(parameter: parameter, count: count, limit: limit)
        case .notAllowedToPost: return string(.target).map { .notAllowedToPost(target: $0) }
        case .tooManyKinds:
            guard let target = string(.target), let limit = int(.limit) else { return nil }
            return .tooManyKinds(target: target, limit: limit)
        case .notANumber:
            guard let target = string(.target), let kind = string(.kind), let field = string(.field) else { return nil }
            return .notANumber(target: target, kind: kind, field: field)
        case .payloadTooLarge:
            guard let size = int(.size), let limit = int(.limit) else { return nil }
            return .payloadTooLarge(size: size, limit: limit)
        case .storageFailed: return .storageFailed(reason: string(.reason) ?? "")
        case .quotaExceeded:
            guard let quota = string(.quota), let limit = int(.limit) else { return nil }
            return .quotaExceeded(quota: quota, limit: limit, uid: int(.uid))
        case .sequenceNotSent:
            guard let app = string(.app), let seq = int(.seq), let next = int(.next) else { return nil }
            return .sequenceNotSent(app: app, seq: seq, next: next)
        case .noHandler: return string(.url).map { .noHandler(url: $0, reason: string(.reason) ?? "") }
        case .ambiguousHandler:
            guard let url = string(.url) else { return nil }
            return .ambiguousHandler(url: url, apps: (parameters["apps"]?.arrayValue ?? []).compactMap(\.stringValue))
        case .launchesHeld:
            guard let app = string(.app), let failed = int(.failed) else { return nil }
            return .launchesHeld(app: app, failed: failed)
        case .invalidRefresh:
            guard let app = string(.app), let id = string(.id) else { return nil }
            return .invalidRefresh(app: app, id: id, reason: string(.reason) ?? "")
        case .tooManyRefreshes:
            guard let app = string(.app), let limit = int(.limit) else { return nil }
            return .tooManyRefreshes(app: app, limit: limit)
        case .noSuchRefresh, .refreshNotRunning:
            guard let app = string(.app), let id = string(.id) else { return nil }
            return error == .noSuchRefresh ? .noSuchRefresh(app: app, id: id) : .refreshNotRunning(app: app, id: id)
        }
    }

    /// An error of io.coalesced.Notifications with the parameters its interface declares.
    private static func known(_ error: NotificationErrorName, _ parameters: JSONObject) -> CoalescedError? {
        func string(_ key: ErrorParameter) -> String? { parameters[key.rawValue]?.stringValue }
        func int(_ key: ErrorParameter) -> Int? { parameters[key.rawValue]?.intValue.map { Int($0) } }
        switch error {
        case .unknownApp: return string(.app).map { .unknownApp(app: $0) }
        case .notAllowed: return string(.app).map { .notAllowed(app: $0) }
        case .invalidRequest:
            guard let app = string(.app), let id = string(.id) else { return nil }
            return .invalidRequest(app: app, id: id, reason: string(.reason) ?? "")
        case .pendingLimit:
            guard let app = string(.app), let limit = int(.limit), let pending = int(.pending) else { return nil }
            return .pendingLimit(app: app, limit: limit, pending: pending)
        case .unknownNotification:
            guard let app = string(.app), let id = string(.id) else { return nil }
            return .unknownNotification(app: app, id: id)
        case .unknownAction:
            guard let app = string(.app), let id = string(.id), let action = string(.action) else { return nil }
            return .unknownAction(app: app, id: id, action: action)
        case .storageFailed: return .notificationStorageFailed(reason: string(.reason) ?? "")
        case .agentOverrun: return int(.limit).map { .agentOverrun(limit: $0) }
        case .quotaExceeded:
            guard let quota = string(.quota), let limit = int(.limit) else { return nil }
            return .notificationQuotaExceeded(quota: quota, limit: limit, uid: int(.uid))
        }
    }
}
