public import CoalesceCore
public import Varlink

extension CoalescingPolicy {
    /// The policy as the interface writes it (`{"policy":"sum","field":"unread"}`): one form for the daemon's
    /// replies and store, the client library's Register and coalescectl's Post.
    public var wire: JSONValue {
        switch self {
        case .latest: ["policy": "latest"]
        case .first: ["policy": "first"]
        case .count: ["policy": "count"]
        case .merge: ["policy": "merge"]
        case .netChange: ["policy": "netChange"]
        case .sum(let field): ["policy": "sum", "field": .string(field)]
        case .queue(let bound): ["policy": "queue", "bound": .int(Int64(bound))]
        }
    }

    /// Reads the wire form (``wire``), as Register's `kinds`, Post's `policy`, GetQueue's replies and the store
    /// give it; members other than the policy's own are left to the caller. `nil` when it is not a policy: an
    /// unknown name, a `sum` without a field, a `queue` bound out of range.
    public init?(wire value: JSONValue) {
        guard case .success(let policy) = Self.reading(wire: value) else { return nil }
        self = policy
    }

    /// Reads the wire form (``wire``), or says why it is not a policy.
    public static func reading(wire value: JSONValue) -> Result<CoalescingPolicy, PolicyProblem> {
        guard let name = value["policy"]?.stringValue else { return .failure(.missing) }
        switch name {
        case "latest": return .success(.latest)
        case "first": return .success(.first)
        case "count": return .success(.count)
        case "merge": return .success(.merge)
        case "netChange": return .success(.netChange)
        case "sum":
            guard let field = value["field"]?.stringValue, !field.isEmpty else { return .failure(.sumWithoutField) }
            guard field.utf8.count <= Self.maximumFieldLength else { return .failure(.fieldTooLong(field.utf8.count)) }
            if let byte = ControlCharacters.first(in: field) { return .failure(.fieldHasControlCharacter(byte)) }
            return .success(.sum(field: field))
        case "queue":
            guard let bound = value["bound"], bound != .null else { return .failure(.queueWithoutBound) }
            guard let number = bound.intValue, number >= 1, number <= Self.maximumQueueBound else {
                return .failure(.boundOutOfRange(bound.jsonText))
            }
            return .success(.queue(bound: Int(number)))
        default: return .failure(.unknown(name))
        }
    }
}
