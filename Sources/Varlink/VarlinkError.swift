/// An error that knows how it travels as a Varlink error reply.
public protocol VarlinkErrorConvertible: Error, Sendable {
    /// Fully qualified error name, such as `org.varlink.service.MethodNotFound`.
    var varlinkName: String { get }
    /// The error's parameters, as its interface declares them.
    var varlinkParameters: JSONObject { get }
}

/// A Varlink error by name and parameters: the standard `org.varlink.service` errors, and any error a peer
/// replied with.
public struct VarlinkError: VarlinkErrorConvertible, Hashable, CustomStringConvertible {
    public var varlinkName: String
    public var varlinkParameters: JSONObject

    public init(name: String, parameters: JSONObject = [:]) {
        self.varlinkName = name
        self.varlinkParameters = parameters
    }

    public var description: String {
        self.varlinkParameters.isEmpty
            ? self.varlinkName
            : "\(self.varlinkName) \(JSONValue.object(self.varlinkParameters).jsonText)"
    }

    /// The call named an interface this service does not have.
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.InterfaceNotFound", parameters: ["interface": .string(interface)])
    }

    /// The interface exists but has no such method.
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.MethodNotFound", parameters: ["method": .string(method)])
    }

    /// The method exists but is not implemented by this service.
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError(name: "org.varlink.service.MethodNotImplemented", parameters: ["method": .string(method)])
    }

    /// A parameter is missing, of the wrong type, or out of range.
    /// - Parameters:
    ///   - parameter: its name, or its path where it is nested (`posters.anyone`, `uids[2]`).
    ///   - reason: why, in words ("expected a bool, got a string"); sent as `reason` when given.
    public static func invalidParameter(_ parameter: String, reason: String? = nil) -> VarlinkError {
        var parameters: JSONObject = ["parameter": .string(parameter)]
        if let reason { parameters["reason"] = .string(reason) }
        return VarlinkError(name: "org.varlink.service.InvalidParameter", parameters: parameters)
    }

    /// The caller may not call this method.
    public static let permissionDenied = VarlinkError(name: "org.varlink.service.PermissionDenied")

    /// The method streams its replies and must be called with `more`.
    public static let expectedMore = VarlinkError(name: "org.varlink.service.ExpectedMore")
}

/// Errors of the conversation rather than of one method. After the first three the server closes the connection.
///
/// They belong to no interface of their own: the server sends them in the interface its service names
/// (``VarlinkService/protocolErrorInterface``), which declares them, so that this module names no product.
public enum VarlinkProtocolError: Error, Hashable, CustomStringConvertible {
    /// A message did not end within the size bound.
    case messageTooLarge(limit: Int)
    /// A message was not valid JSON, or not a well-formed call or reply.
    case invalidMessage(String)
    /// A quota on connections refuses this one (the server serves as many as the quota allows it, or it has no
    /// descriptor left); sent instead of any reply, then the connection is closed.
    case tooManyConnections(VarlinkConnectionQuota)
    /// A method failed in a way its interface does not declare: a bug in the server.
    case internalError(String)
    /// The call asked to leave Varlink for another protocol (`"upgrade": true`), which this method does not offer;
    /// answered like any failed call, and the connection stays a Varlink connection.
    case upgradeNotSupported(method: String)

    /// The error's name within the interface that declares it, such as `MessageTooLarge`.
    public var errorName: String {
        switch self {
        case .messageTooLarge: return "MessageTooLarge"
        case .invalidMessage: return "InvalidMessage"
        case .tooManyConnections: return "TooManyConnections"
        case .internalError: return "InternalError"
        case .upgradeNotSupported: return "UpgradeNotSupported"
        }
    }

    public var varlinkParameters: JSONObject {
        switch self {
        case .messageTooLarge(let limit): return ["limit": .int(Int64(limit))]
        case .tooManyConnections(let quota): return ["quota": .string(quota.name), "limit": .int(Int64(quota.limit))]
        case .invalidMessage(let reason), .internalError(let reason): return ["reason": .string(reason)]
        case .upgradeNotSupported(let method): return ["method": .string(method)]
        }
    }

    /// The error as it goes to a peer, named in `interface`: the interface that declares the protocol errors.
    public func varlinkError(in interface: String) -> VarlinkError {
        VarlinkError(name: interface + "." + self.errorName, parameters: self.varlinkParameters)
    }

    public var description: String {
        switch self {
        case .messageTooLarge(let limit): return "message larger than the limit of \(limit) bytes"
        case .invalidMessage(let reason): return "invalid message: \(reason)"
        case .tooManyConnections(let quota): return "too many connections (\(quota))"
        case .internalError(let reason): return "internal error: \(reason)"
        case .upgradeNotSupported(let method): return "\(method) offers no protocol upgrade"
        }
    }
}
