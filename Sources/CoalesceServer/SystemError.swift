import CoalesceCore
import CoalesceWire
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
    /// The app has no scene of that id.
    case noSuchScene(app: String, scene: String)
    /// The scene's session cannot be asked to focus it.
    case sceneNotFocusable(app: String, scene: String, reason: String)

    static let interface = SystemErrorName.interface

    var varlinkName: String { self.errorName.qualified }

    /// The error as the interface file names it, with its parameters' names.
    var errorName: SystemErrorName {
        switch self {
        case .noSuchApp: .noSuchApp
        case .wrongState: .wrongState
        case .noForegroundApp: .noForegroundApp
        case .launchTimedOut: .launchTimedOut
        case .launchFailed: .launchFailed
        case .nothingToPurge: .nothingToPurge
        case .monitorOverrun: .monitorOverrun
        case .invalidWatch: .invalidWatch
        case .noSuchWatch: .noSuchWatch
        case .watchExists: .watchExists
        case .storageFailed: .storageFailed
        case .noSuchScene: .noSuchScene
        case .sceneNotFocusable: .sceneNotFocusable
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .noSuchApp(let app): ErrorParameter.object([.app: .string(app)])
        case .wrongState(let app, let state, let reason):
            ErrorParameter.object([.app: .string(app), .state: .string(state.rawValue), .reason: .string(reason)])
        case .noForegroundApp, .nothingToPurge: [:]
        case .launchTimedOut(let app, let timeout): ErrorParameter.object([.app: .string(app), .timeoutSec: .double(timeout.seconds)])
        case .launchFailed(let app, let unit, let reason):
            ErrorParameter.object([.app: .string(app), .unit: .string(unit), .reason: .string(reason)])
        case .monitorOverrun(let bound): ErrorParameter.object([.bound: .int(Int64(bound))])
        case .invalidWatch(let watch, let reason), .noSuchWatch(let watch, let reason):
            ErrorParameter.object([.watch: .string(watch), .reason: .string(reason)])
        case .watchExists(let watch): ErrorParameter.object([.watch: .string(watch)])
        case .storageFailed(let reason): ErrorParameter.object([.reason: .string(reason)])
        case .noSuchScene(let app, let scene): ErrorParameter.object([.app: .string(app), .scene: .string(scene)])
        case .sceneNotFocusable(let app, let scene, let reason):
            ErrorParameter.object([.app: .string(app), .scene: .string(scene), .reason: .string(reason)])
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
