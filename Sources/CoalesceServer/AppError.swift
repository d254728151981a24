import CoalesceCore
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

    static let interface = "io.coalesced.App"

    var varlinkName: String {
        switch self {
        case .invalidAppName: return Self.interface + ".InvalidAppName"
        case .notOwner: return Self.interface + ".NotOwner"
        case .tooManyApps: return Self.interface + ".TooManyApps"
        case .notRegistered: return Self.interface + ".NotRegistered"
        case .wrongState: return Self.interface + ".WrongState"
        case .noSuchTask: return Self.interface + ".NoSuchTask"
        case .tooManyTasks: return Self.interface + ".TooManyTasks"
        case .launchUnitNotAllowed: return Self.interface + ".LaunchUnitNotAllowed"
        case .backgroundModeNotDeclared: return Self.interface + ".BackgroundModeNotDeclared"
        case .stateTooLarge: return Self.interface + ".StateTooLarge"
        case .replaced: return Self.interface + ".Replaced"
        case .unknownTarget: return Self.interface + ".UnknownTarget"
        case .invalidKind: return Self.interface + ".InvalidKind"
        case .invalidPolicy: return Self.interface + ".InvalidPolicy"
        case .invalidTopic: return Self.interface + ".InvalidTopic"
        case .invalidPosters: return Self.interface + ".InvalidPosters"
        case .invalidBackgroundMode: return Self.interface + ".InvalidBackgroundMode"
        case .invalidLaunchUnit: return Self.interface + ".InvalidLaunchUnit"
        case .tooManyDeclared: return Self.interface + ".TooManyDeclared"
        case .notAllowedToPost: return Self.interface + ".NotAllowedToPost"
        case .tooManyKinds: return Self.interface + ".TooManyKinds"
        case .notANumber: return Self.interface + ".NotANumber"
        case .payloadTooLarge: return Self.interface + ".PayloadTooLarge"
        case .storageFailed: return Self.interface + ".StorageFailed"
        case .quotaExceeded: return Self.interface + ".QuotaExceeded"
        case .sequenceNotSent: return Self.interface + ".SequenceNotSent"
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .invalidAppName(let name, let reason): return ["name": .string(name), "reason": .string(reason)]
        case .notOwner(let app), .notRegistered(let app), .replaced(let app): return ["app": .string(app)]
        case .tooManyApps(let limit): return ["limit": .int(Int64(limit))]
        case .wrongState(let app, let state, let reason):
            return ["app": .string(app), "state": .string(state.rawValue), "reason": .string(reason)]
        case .noSuchTask(let app, let id): return ["app": .string(app), "id": .int(Int64(id))]
        case .tooManyTasks(let app, let limit): return ["app": .string(app), "limit": .int(Int64(limit))]
        case .launchUnitNotAllowed(let app, let unit): return ["app": .string(app), "unit": .string(unit)]
        case .backgroundModeNotDeclared(let app, let kind, let mode):
            return ["app": .string(app), "kind": .string(kind), "mode": .string(mode)]
        case .stateTooLarge(let app, let size, let limit):
            return ["app": .string(app), "size": .int(Int64(size)), "limit": .int(Int64(limit))]
        case .unknownTarget(let target), .notAllowedToPost(let target): return ["target": .string(target)]
        case .invalidKind(let kind, let reason), .invalidPolicy(let kind, let reason):
            return ["kind": .string(kind), "reason": .string(reason)]
        case .invalidTopic(let topic, let reason): return ["topic": .string(topic), "reason": .string(reason)]
        case .invalidPosters(let reason): return ["reason": .string(reason)]
        case .invalidBackgroundMode(let mode, let reason): return ["mode": .string(mode), "reason": .string(reason)]
        case .invalidLaunchUnit(let unit, let reason): return ["unit": .string(unit), "reason": .string(reason)]
        case .tooManyDeclared(let parameter, let count, let limit):
            return ["parameter": .string(parameter), "count": .int(Int64(count)), "limit": .int(Int64(limit))]
        case .tooManyKinds(let target, let limit): return ["target": .string(target), "limit": .int(Int64(limit))]
        case .notANumber(let target, let kind, let field):
            return ["target": .string(target), "kind": .string(kind), "field": .string(field)]
        case .payloadTooLarge(let size, let limit): return ["size": .int(Int64(size)), "limit": .int(Int64(limit))]
        case .storageFailed(let reason): return ["reason": .string(reason)]
        case .quotaExceeded(let quota):
            var parameters: JSONObject = ["quota": .string(quota.name), "limit": .int(Int64(quota.limit))]
            if let uid = quota.uid { parameters["uid"] = .int(Int64(uid)) }
            return parameters
        case .sequenceNotSent(let app, let seq, let next): return ["app": .string(app), "seq": .int(seq), "next": .int(next)]
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
