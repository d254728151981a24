public import CoalesceCore
public import Varlink

extension CoalescingPolicy {
    /// The longest `sum` field the wire form takes, in bytes.
    public static let maximumFieldLength = 128
    /// The largest `queue` bound the wire form takes: a queue holds every payload up to it.
    public static let maximumQueueBound = 10_000

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
        guard let name = value["policy"]?.stringValue else { return nil }
        switch name {
        case "latest": self = .latest
        case "first": self = .first
        case "count": self = .count
        case "merge": self = .merge
        case "netChange": self = .netChange
        case "sum":
            guard let field = value["field"]?.stringValue, !field.isEmpty, field.utf8.count <= Self.maximumFieldLength
            else { return nil }
            self = .sum(field: field)
        case "queue":
            guard let bound = value["bound"]?.intValue, bound >= 1, bound <= Self.maximumQueueBound else { return nil }
            self = .queue(bound: Int(bound))
        default: return nil
        }
    }
}
