import CoalesceCore
import CoalesceWire
import Varlink

/// The errors of `io.coalesced.Notifications`, one case for each error its interface file declares.
enum NotificationError: Error, VarlinkErrorConvertible, Hashable {
    case unknownApp(app: String)
    case notAllowed(app: String)
    case invalidRequest(app: String, id: String, reason: String)
    case pendingLimit(app: String, limit: Int, pending: Int)
    case quotaExceeded(Quota)
    case unknownNotification(app: String, id: String)
    case unknownAction(app: String, id: String, action: String)
    case storageFailed(reason: String)
    case agentOverrun(limit: Int)

    static let interface = NotificationErrorName.interface

    var varlinkName: String { self.errorName.qualified }

    /// The error as the interface file names it, with its parameters' names.
    var errorName: NotificationErrorName {
        switch self {
        case .unknownApp: .unknownApp
        case .notAllowed: .notAllowed
        case .invalidRequest: .invalidRequest
        case .pendingLimit: .pendingLimit
        case .quotaExceeded: .quotaExceeded
        case .unknownNotification: .unknownNotification
        case .unknownAction: .unknownAction
        case .storageFailed: .storageFailed
        case .agentOverrun: .agentOverrun
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .unknownApp(let app), .notAllowed(let app): ErrorParameter.object([.app: .string(app)])
        case .invalidRequest(let app, let id, let reason):
            ErrorParameter.object([.app: .string(app), .id: .string(id), .reason: .string(reason)])
        case .pendingLimit(let app, let limit, let pending):
            ErrorParameter.object([.app: .string(app), .limit: .int(Int64(limit)), .pending: .int(Int64(pending))])
        case .quotaExceeded(let quota):
            ErrorParameter.object([
                .quota: .string(quota.name), .limit: .int(Int64(quota.limit)), .uid: quota.uid.map { .int(Int64($0)) },
            ])
        case .unknownNotification(let app, let id): ErrorParameter.object([.app: .string(app), .id: .string(id)])
        case .unknownAction(let app, let id, let action):
            ErrorParameter.object([.app: .string(app), .id: .string(id), .action: .string(action)])
        case .storageFailed(let reason): ErrorParameter.object([.reason: .string(reason)])
        case .agentOverrun(let limit): ErrorParameter.object([.limit: .int(Int64(limit))])
        }
    }

    /// A request the scheduler refused, as the caller sees it.
    init(_ error: AlertError, app: AppName, id: String) {
        switch error {
        case .pendingLimit(let limit, let pending): self = .pendingLimit(app: app.value, limit: limit, pending: pending)
        default: self = .invalidRequest(app: app.value, id: id, reason: error.description)
        }
    }
}
