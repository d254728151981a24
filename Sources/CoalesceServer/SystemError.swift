import CoalesceCore
import Varlink

/// The errors of `io.coalesced.System`, one case for each error its interface file declares, with its parameters.
enum SystemError: Error, VarlinkErrorConvertible, Hashable {
    /// No app of that name is registered.
    case noSuchApp(app: String)
    /// The lifecycle refused the request.
    case wrongState(app: String, state: AppState, reason: String)
    /// The call named no app, and none is on screen.
    case noForegroundApp
    /// The launched app did not attach in time.
    case launchTimedOut(app: String, timeout: Duration)
    /// The app's launch unit could not be started.
    case launchFailed(app: String, unit: String, reason: String)
    /// No suspended app to purge.
    case nothingToPurge
    /// The monitor fell this far behind and was ended.
    case monitorOverrun(bound: Int)
    /// A journal watch that cannot be used, and why.
    case invalidWatch(watch: String, reason: String)
    /// No journal watch of that name (or not one added at run time, for RemoveWatch).
    case noSuchWatch(watch: String, reason: String)
    /// A watch of that name exists already.
    case watchExists(watch: String)
    /// The store did not keep the change.
    case storageFailed(reason: String)

    static let interface = "io.coalesced.System"

    var varlinkName: String {
        switch self {
        case .noSuchApp: return Self.interface + ".NoSuchApp"
        case .wrongState: return Self.interface + ".WrongState"
        case .noForegroundApp: return Self.interface + ".NoForegroundApp"
        case .launchTimedOut: return Self.interface + ".LaunchTimedOut"
        case .launchFailed: return Self.interface + ".LaunchFailed"
        case .nothingToPurge: return Self.interface + ".NothingToPurge"
        case .monitorOverrun: return Self.interface + ".MonitorOverrun"
        case .invalidWatch: return Self.interface + ".InvalidWatch"
        case .noSuchWatch: return Self.interface + ".NoSuchWatch"
        case .watchExists: return Self.interface + ".WatchExists"
        case .storageFailed: return Self.interface + ".StorageFailed"
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .noSuchApp(let app): return ["app": .string(app)]
        case .wrongState(let app, let state, let reason):
            return ["app": .string(app), "state": .string(state.rawValue), "reason": .string(reason)]
        case .noForegroundApp, .nothingToPurge: return [:]
        case .launchTimedOut(let app, let timeout): return ["app": .string(app), "timeoutSec": .double(timeout.seconds)]
        case .launchFailed(let app, let unit, let reason):
            return ["app": .string(app), "unit": .string(unit), "reason": .string(reason)]
        case .monitorOverrun(let bound): return ["bound": .int(Int64(bound))]
        case .invalidWatch(let watch, let reason), .noSuchWatch(let watch, let reason):
            return ["watch": .string(watch), "reason": .string(reason)]
        case .watchExists(let watch): return ["watch": .string(watch)]
        case .storageFailed(let reason): return ["reason": .string(reason)]
        }
    }
}

extension SystemError: LifecycleRefusal {
    /// Every refusal is WrongState: the System side opens and ends no background tasks, the only requests refused
    /// otherwise.
    init(_ error: LifecycleError, app: AppName, state: AppState) {
        self = .wrongState(app: app.value, state: state, reason: error.description)
    }
}
