import CoalesceCore
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

    static let interface = "io.coalesced.Notifications"

    var varlinkName: String {
        switch self {
        case .unknownApp: return Self.interface + ".UnknownApp"
        case .notAllowed: return Self.interface + ".NotAllowed"
        case .invalidRequest: return Self.interface + ".InvalidRequest"
        case .pendingLimit: return Self.interface + ".PendingLimit"
        case .quotaExceeded: return Self.interface + ".QuotaExceeded"
        case .unknownNotification: return Self.interface + ".UnknownNotification"
        case .unknownAction: return Self.interface + ".UnknownAction"
        case .storageFailed: return Self.interface + ".StorageFailed"
        case .agentOverrun: return Self.interface + ".AgentOverrun"
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .unknownApp(let app), .notAllowed(let app): return ["app": .string(app)]
        case .invalidRequest(let app, let id, let reason):
            return ["app": .string(app), "id": .string(id), "reason": .string(reason)]
        case .pendingLimit(let app, let limit, let pending):
            return ["app": .string(app), "limit": .int(Int64(limit)), "pending": .int(Int64(pending))]
        case .quotaExceeded(let quota):
            var parameters: JSONObject = ["quota": .string(quota.name), "limit": .int(Int64(quota.limit))]
            if let uid = quota.uid { parameters["uid"] = .int(Int64(uid)) }
            return parameters
        case .unknownNotification(let app, let id): return ["app": .string(app), "id": .string(id)]
        case .unknownAction(let app, let id, let action):
            return ["app": .string(app), "id": .string(id), "action": .string(action)]
        case .storageFailed(let reason): return ["reason": .string(reason)]
        case .agentOverrun(let limit): return ["limit": .int(Int64(limit))]
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
