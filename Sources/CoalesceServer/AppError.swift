import CoalesceCore
import CoalesceWire
import Varlink

/// The errors of `io.coalesced.App`, one case for each error its interface file declares, with its parameters.
enum AppError: Error, VarlinkErrorConvertible, Hashable {
    /// The name is not reverse-DNS.
    case invalidAppName(name: String, reason: String)
    /// Another user registered this app first.
    case notOwner(app: String)
    /// The daemon already knows as many apps as `MaxApps=` allows.
    case tooManyApps(limit: Int)
    /// An app acting for itself before it registered.
    case notRegistered(app: String)
    /// The lifecycle refused the request.
    case wrongState(app: String, state: AppState, reason: String)
    case noSuchTask(app: String, id: Int)
    case tooManyTasks(app: String, limit: Int)
    case launchUnitNotAllowed(app: String, unit: String)
    /// A kind (declared now, or kept from the registration before) wakes the app into a mode it does not declare.
    case backgroundModeNotDeclared(app: String, kind: String, mode: String)
    case stateTooLarge(app: String, size: Int, limit: Int)
    /// A second Attach took the stream over.
    case replaced(app: String)
    case unknownTarget(target: String)
    case invalidKind(kind: String, reason: String)
    /// A kind's policy (declared in Register's `kinds`, or given with a Post) is not one, for the reason given.
    case invalidPolicy(kind: String, reason: String)
    /// A topic of Register's `topics` is not named as kinds are.
    case invalidTopic(topic: String, reason: String)
    /// Register's `posters` names a group that does not exist, or a number that is not a uid.
    case invalidPosters(reason: String)
    /// One of Register's `backgroundModes` is empty or too long.
    case invalidBackgroundMode(mode: String, reason: String)
    /// Register's `launchUnit` is not the name of a service unit.
    case invalidLaunchUnit(unit: String, reason: String)
    /// Register declares more kinds, topics or background modes (`parameter`) than the daemon takes.
    case tooManyDeclared(parameter: String, count: Int, limit: Int)
    case notAllowedToPost(target: String)
    case tooManyKinds(target: String, limit: Int)
    case notANumber(target: String, kind: String, field: String)
    case payloadTooLarge(size: Int, limit: Int)
    case storageFailed(reason: String)
    /// A quota (`[Quotas]`) would be passed: the apps a user registers, or the bytes apps' events take.
    case quotaExceeded(Quota)
    /// Ack named a number the app was not sent; `next` is the number its next callback or event carries.
    case sequenceNotSent(app: String, seq: Int64, next: Int64)
    /// Open: no app the caller may use opens the URL (or the one it named does not), and why.
    case noHandler(url: String, reason: String)
    /// Open: several apps open the URL, and the caller named none.
    case ambiguousHandler(url: String, apps: [String])
    /// Open: the app would have to be launched, but its launches failed `failed` times in a row.
    case launchesHeld(app: String, failed: Int)
    /// ScheduleRefresh: the request is not one the daemon takes, and why.
    case invalidRefresh(app: String, id: String, reason: String)
    /// ScheduleRefresh: the app has as many refreshes scheduled as `[Refresh] MaxRefreshes=` allows.
    case tooManyRefreshes(app: String, limit: Int)
    /// The app has no refresh of that id.
    case noSuchRefresh(app: String, id: String)
    /// RefreshDone for a refresh that is not running.
    case refreshNotRunning(app: String, id: String)

    static let interface = AppErrorName.interface

    var varlinkName: String { self.errorName.qualified }

    /// The error as the interface file names it, with its parameters' names.
    var errorName: AppErrorName {
        switch self {
        case .invalidAppName: .invalidAppName
        case .notOwner: .notOwner
        case .tooManyApps: .tooManyApps
        case .notRegistered: .notRegistered
        case .wrongState: .wrongState
        case .noSuchTask: .noSuchTask
        case .tooManyTasks: .tooManyTasks
        case .launchUnitNotAllowed: .launchUnitNotAllowed
        case .backgroundModeNotDeclared: .backgroundModeNotDeclared
        case .stateTooLarge: .stateTooLarge
        case .replaced: .replaced
        case .unknownTarget: .unknownTarget
        case .invalidKind: .invalidKind
        case .invalidPolicy: .invalidPolicy
        case .invalidTopic: .invalidTopic
        case .invalidPosters: .invalidPosters
        case .invalidBackgroundMode: .invalidBackgroundMode
        case .invalidLaunchUnit: .invalidLaunchUnit
        case .tooManyDeclared: .tooManyDeclared
        case .notAllowedToPost: .notAllowedToPost
        case .tooManyKinds: .tooManyKinds
        case .notANumber: .notANumber
        case .payloadTooLarge: .payloadTooLarge
        case .storageFailed: .storageFailed
        case .quotaExceeded: .quotaExceeded
        case .sequenceNotSent: .sequenceNotSent
        case .noHandler: .noHandler
        case .ambiguousHandler: .ambiguousHandler
        case .launchesHeld: .launchesHeld
        case .invalidRefresh: .invalidRefresh
        case .tooManyRefreshes: .tooManyRefreshes
        case .noSuchRefresh: .noSuchRefresh
        case .refreshNotRunning: .refreshNotRunning
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .invalidAppName(let name, let reason): ErrorParameter.object([.name: .string(name), .reason: .string(reason)])
        case .notOwner(let app), .notRegistered(let app), .replaced(let app): ErrorParameter.object([.app: .string(app)])
        case .tooManyApps(let limit): ErrorParameter.object([.limit: .int(Int64(limit))])
        case .wrongState(let app, let state, let reason):
            ErrorParameter.object([.app: .string(app), .state: .string(state.rawValue), .reason: .string(reason)])
        case .noSuchTask(let app, let id): ErrorParameter.object([.app: .string(app), .id: .int(Int64(id))])
        case .tooManyTasks(let app, let limit): ErrorParameter.object([.app: .string(app), .limit: .int(Int64(limit))])
        case .launchUnitNotAllowed(let app, let unit): ErrorParameter.object([.app: .string(app), .unit: .string(unit)])
        case .backgroundModeNotDeclared(let app, let kind, let mode):
            ErrorParameter.object([.app: .string(app), .kind: .string(kind), .mode: .string(mode)])
        case .stateTooLarge(let app, let size, let limit):
            ErrorParameter.object([.app: .string(app), .size: .int(Int64(size)), .limit: .int(Int64(limit))])
        case .unknownTarget(let target), .notAllowedToPost(let target): ErrorParameter.object([.target: .string(target)])
        case .invalidKind(let kind, let reason), .invalidPolicy(let kind, let reason):
            ErrorParameter.object([.kind: .string(kind), .reason: .string(reason)])
        case .invalidTopic(let topic, let reason): ErrorParameter.object([.topic: .string(topic), .reason: .string(reason)])
        case .invalidPosters(let reason), .storageFailed(let reason): ErrorParameter.object([.reason: .string(reason)])
        case .invalidBackgroundMode(let mode, let reason):
            ErrorParameter.object([.mode: .string(mode), .reason: .string(reason)])
        case .invalidLaunchUnit(let unit, let reason): ErrorParameter.object([.unit: .string(unit), .reason: .string(reason)])
        case .tooManyDeclared(let parameter, let count, let limit):
            ErrorParameter.object([.parameter: .string(parameter), .count: .int(Int64(count)), .limit: .int(Int64(limit))])
        case .tooManyKinds(let target, let limit):
            ErrorParameter.object([.target: .string(target), .limit: .int(Int64(limit))])
        case .notANumber(let target, let kind, let field):
            ErrorParameter.object([.target: .string(target), .kind: .string(kind), .field: .string(field)])
        case .payloadTooLarge(let size, let limit):
            ErrorParameter.object([.size: .int(Int64(size)), .limit: .int(Int64(limit))])
        case .quotaExceeded(let quota):
            ErrorParameter.object([
                .quota: .string(quota.name), .limit: .int(Int64(quota.limit)), .uid: quota.uid.map { .int(Int64($0)) },
            ])
        case .sequenceNotSent(let app, let seq, let next):
            ErrorParameter.object([.app: .string(app), .seq: .int(seq), .next: .int(next)])
        case .noHandler(let url, let reason): ErrorParameter.object([.url: .string(url), .reason: .string(reason)])
        case .ambiguousHandler(let url, let apps):
            ErrorParameter.object([.url: .string(url), .apps: .array(apps.map { .string($0) })])
        case .launchesHeld(let app, let failed): ErrorParameter.object([.app: .string(app), .failed: .int(Int64(failed))])
        case .invalidRefresh(let app, let id, let reason):
            ErrorParameter.object([.app: .string(app), .id: .string(id), .reason: .string(reason)])
        case .tooManyRefreshes(let app, let limit): ErrorParameter.object([.app: .string(app), .limit: .int(Int64(limit))])
        case .noSuchRefresh(let app, let id), .refreshNotRunning(let app, let id):
            ErrorParameter.object([.app: .string(app), .id: .string(id)])
        }
    }

    init(_ error: AppNameError) {
        self = .invalidAppName(name: error.name, reason: error.reason)
    }

    init(_ refusal: PostRefusal, target: String) {
        switch refusal {
        case .notANumber(let kind, let field): self = .notANumber(target: target, kind: kind.value, field: field)
        case .tooManyKinds(let limit): self = .tooManyKinds(target: target, limit: limit)
        case .overQuota(let quota): self = .quotaExceeded(quota)
        }
    }
}

extension AppError: LifecycleRefusal {
    /// A background task the app does not hold, or one too many, has its own error; any other refusal is
    /// WrongState.
    init(_ error: LifecycleError, app: AppName, state: AppState) {
        switch error {
        case .noSuchTask(let id): self = .noSuchTask(app: app.value, id: id)
        case .tooManyTasks(let limit): self = .tooManyTasks(app: app.value, limit: limit)
        case .notSent(let sequence, let next):
            self = .sequenceNotSent(app: app.value, seq: Int64(truncatingIfNeeded: sequence), next: Int64(truncatingIfNeeded: next))
        default: self = .wrongState(app: app.value, state: state, reason: error.description)
        }
    }
}

/// An interface's error for a request the app's lifecycle refused, so that the manager's lifecycle input
/// (``AppManager``) answers each side in its own interface's errors.
protocol LifecycleRefusal: Error {
    /// - Parameter state: the app's state when it refused.
    init(_ error: LifecycleError, app: AppName, state: AppState)
}
