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
}
