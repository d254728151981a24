import CoalesceCore
import Varlink

/// Errors of the app-facing methods, as `io.coalesced.App` and `io.coalesced.System` declare them.
enum AppError: Error, VarlinkErrorConvertible, Hashable {
    /// The name is not reverse-DNS.
    case invalidAppName(name: String, reason: String)
    /// Another user registered this app first.
    case notOwner(app: String)
    /// The daemon already knows as many apps as `MaxApps=` allows.
    case tooManyApps(limit: Int)
    /// No app of that name is registered.
    case noSuchApp(app: String)

    var varlinkName: String {
        switch self {
        case .invalidAppName: return "io.coalesced.App.InvalidAppName"
        case .notOwner: return "io.coalesced.App.NotOwner"
        case .tooManyApps: return "io.coalesced.App.TooManyApps"
        case .noSuchApp: return "io.coalesced.System.NoSuchApp"
        }
    }

    var varlinkParameters: [String: JSONValue] {
        switch self {
        case .invalidAppName(let name, let reason): return ["name": .string(name), "reason": .string(reason)]
        case .notOwner(let app), .noSuchApp(let app): return ["app": .string(app)]
        case .tooManyApps(let limit): return ["limit": .int(Int64(limit))]
        }
    }

    init(_ error: AppNameError) {
        self = .invalidAppName(name: error.name, reason: error.reason)
    }
}
