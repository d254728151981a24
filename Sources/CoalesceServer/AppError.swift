import CoalesceCore
import Varlink

/// Errors of the app-facing methods, as `io.coalesced.App` and `io.coalesced.System` declare them.
enum AppError: Error, VarlinkErrorConvertible, Hashable {
    /// Which interface a request came through: the errors both declare carry its name.
    enum Side: String, Hashable {
        case app = "io.coalesced.App"
        case system = "io.coalesced.System"
    }

    /// The name is not reverse-DNS.
    case invalidAppName(name: String, reason: String)
    /// Another user registered this app first.
    case notOwner(app: String)
    /// The daemon already knows as many apps as `MaxApps=` allows.
    case tooManyApps(limit: Int)
    /// An app acting for itself before it registered.
    case notRegistered(app: String)
    /// No app of that name is registered (System side).
    case noSuchApp(app: String)
    /// The lifecycle refused the request.
    case wrongState(app: String, state: AppState, reason: String, side: Side)
    case noSuchTask(app: String, id: Int)
    case stateTooLarge(app: String, size: Int, limit: Int)
    /// A second Attach took the stream over.
    case replaced(app: String)
    case storageFailed(reason: String)
    case noForegroundApp
    case launchTimedOut(app: String, timeout: Duration)
    case launchFailed(app: String, unit: String, reason: String)
    case nothingToPurge
    case monitorOverrun(bound: Int)
    case unknownTarget(target: String)
    case invalidKind(kind: String, reason: String)
    case notAllowedToPost(target: String)
    case tooManyKinds(target: String, limit: Int)
    case notANumber(target: String, kind: String, field: String)
    case payloadTooLarge(size: Int, limit: Int)
    case launchUnitNotAllowed(app: String, unit: String)
    case tooManyTasks(app: String, limit: Int)
    /// A kind (declared now, or kept from the registration before) wakes the app into a mode it does not declare.
    case backgroundModeNotDeclared(app: String, kind: String, mode: String)

    var varlinkName: String {
        switch self {
        case .invalidAppName: return "io.coalesced.App.InvalidAppName"
        case .notOwner: return "io.coalesced.App.NotOwner"
        case .tooManyApps: return "io.coalesced.App.TooManyApps"
        case .notRegistered: return "io.coalesced.App.NotRegistered"
        case .noSuchApp: return "io.coalesced.System.NoSuchApp"
        case .wrongState(_, _, _, let side): return side.rawValue + ".WrongState"
        case .noSuchTask: return "io.coalesced.App.NoSuchTask"
        case .stateTooLarge: return "io.coalesced.App.StateTooLarge"
        case .replaced: return "io.coalesced.App.Replaced"
        case .storageFailed: return "io.coalesced.App.StorageFailed"
        case .noForegroundApp: return "io.coalesced.System.NoForegroundApp"
        case .launchTimedOut: return "io.coalesced.System.LaunchTimedOut"
        case .launchFailed: return "io.coalesced.System.LaunchFailed"
        case .nothingToPurge: return "io.coalesced.System.NothingToPurge"
        case .monitorOverrun: return "io.coalesced.System.MonitorOverrun"
        case .unknownTarget: return "io.coalesced.App.UnknownTarget"
        case .invalidKind: return "io.coalesced.App.InvalidKind"
        case .notAllowedToPost: return "io.coalesced.App.NotAllowedToPost"
        case .tooManyKinds: return "io.coalesced.App.TooManyKinds"
        case .notANumber: return "io.coalesced.App.NotANumber"
        case .payloadTooLarge: return "io.coalesced.App.PayloadTooLarge"
        case .launchUnitNotAllowed: return "io.coalesced.App.LaunchUnitNotAllowed"
        case .tooManyTasks: return "io.coalesced.App.TooManyTasks"
        case .backgroundModeNotDeclared: return "io.coalesced.App.BackgroundModeNotDeclared"
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .invalidAppName(let name, let reason): return ["name": .string(name), "reason": .string(reason)]
        case .notOwner(let app), .noSuchApp(let app), .notRegistered(let app), .replaced(let app):
            return ["app": .string(app)]
        case .tooManyApps(let limit): return ["limit": .int(Int64(limit))]
        case .wrongState(let app, let state, let reason, _):
            return ["app": .string(app), "state": .string(state.rawValue), "reason": .string(reason)]
        case .noSuchTask(let app, let id): return ["app": .string(app), "id": .int(Int64(id))]
        case .stateTooLarge(let app, let size, let limit):
            return ["app": .string(app), "size": .int(Int64(size)), "limit": .int(Int64(limit))]
        case .storageFailed(let reason): return ["reason": .string(reason)]
        case .noForegroundApp, .nothingToPurge: return [:]
        case .launchTimedOut(let app, let timeout): return ["app": .string(app), "timeoutSec": .double(timeout.seconds)]
        case .launchFailed(let app, let unit, let reason):
            return ["app": .string(app), "unit": .string(unit), "reason": .string(reason)]
        case .monitorOverrun(let bound): return ["bound": .int(Int64(bound))]
        case .unknownTarget(let target), .notAllowedToPost(let target): return ["target": .string(target)]
        case .invalidKind(let kind, let reason): return ["kind": .string(kind), "reason": .string(reason)]
        case .tooManyKinds(let target, let limit): return ["target": .string(target), "limit": .int(Int64(limit))]
        case .payloadTooLarge(let size, let limit): return ["size": .int(Int64(size)), "limit": .int(Int64(limit))]
        case .launchUnitNotAllowed(let app, let unit): return ["app": .string(app), "unit": .string(unit)]
        case .tooManyTasks(let app, let limit): return ["app": .string(app), "limit": .int(Int64(limit))]
        case .backgroundModeNotDeclared(let app, let kind, let mode):
            return ["app": .string(app), "kind": .string(kind), "mode": .string(mode)]
        case .notANumber(let target, let kind, let field):
            return ["target": .string(target), "kind": .string(kind), "field": .string(field)]
        }
    }

    init(_ error: AppNameError) {
        self = .invalidAppName(name: error.name, reason: error.reason)
    }

    init(_ refusal: PostRefusal, target: String) {
        switch refusal {
        case .notANumber(let kind, let field): self = .notANumber(target: target, kind: kind.value, field: field)
        case .tooManyKinds(let limit): self = .tooManyKinds(target: target, limit: limit)
        }
    }

    init(_ error: LifecycleError, app: AppName, state: AppState, side: Side) {
        if case .noSuchTask(let id) = error {
            self = .noSuchTask(app: app.value, id: id)
        } else if case .tooManyTasks(let limit) = error {
            self = .tooManyTasks(app: app.value, limit: limit)
        } else {
            self = .wrongState(app: app.value, state: state, reason: error.description, side: side)
        }
    }
}
