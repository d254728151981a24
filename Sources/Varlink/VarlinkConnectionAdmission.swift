/// A bound on connections that a refusal names, as the peer reads it in `TooManyConnections`: the setting's name
/// and the number it allowed.
public enum VarlinkConnectionQuota: Sendable, Hashable, CustomStringConvertible {
    /// Connections open at once (``VarlinkServerLimits/maximumConnections``, less the reserve for a peer that is
    /// not privileged).
    case connections(limit: Int)
    /// Connections open at once from one uid (``VarlinkServerLimits/maximumConnectionsPerUser``).
    case connectionsPerUser(limit: Int)
    /// The server's file descriptors ran out (its `RLIMIT_NOFILE`, or the system's table).
    case fileDescriptors(limit: Int)

    /// The setting an operator changes to move the bound.
    public var name: String {
        switch self {
        case .connections: return "MaxConnections"
        case .connectionsPerUser: return "MaxConnectionsPerUser"
        case .fileDescriptors: return "LimitNOFILE"
        }
    }

    public var limit: Int {
        switch self {
        case .connections(let limit), .connectionsPerUser(let limit), .fileDescriptors(let limit): return limit
        }
    }

    public var description: String { "\(self.name)=\(self.limit)" }
}

/// Which connections are let in: a total, a part of it kept for privileged peers (root and administrators), and a
/// bound per uid for everyone else, so that one user cannot take every connection.
///
/// Not thread-safe: the server keeps it under a lock.
struct VarlinkConnectionAdmission {
    /// Connections counted now.
    private(set) var total = 0
    /// Connections counted now, by the uid of peers that are not privileged.
    private(set) var byUser: [UInt32: Int] = [:]

    /// How a connection was counted, to be given back to ``release(_:)`` when it closes.
    struct Ticket: Sendable {
        var uid: UInt32?
    }

    /// Counts a new connection, or says which quota refuses it (and counts nothing).
    /// - Parameters:
    ///   - uid: the peer's uid; `nil` when the kernel could not say, and then only the totals apply.
    ///   - privileged: the peer may use the reserve, and no per-uid bound applies to it.
    mutating func admit(
        uid: UInt32?,
        privileged: Bool,
        limits: VarlinkServerLimits
    ) -> Result<Ticket, VarlinkConnectionRefused> {
        if privileged {
            guard self.total < limits.maximumConnections else {
                return .failure(VarlinkConnectionRefused(quota: .connections(limit: limits.maximumConnections)))
            }
            self.total += 1
            return .success(Ticket(uid: nil))
        }
        let shared = limits.maximumConnections - min(max(limits.reservedConnections, 0), limits.maximumConnections)
        guard self.total < shared else {
            return .failure(VarlinkConnectionRefused(quota: .connections(limit: shared)))
        }
        if let uid {
            let held = self.byUser[uid, default: 0]
            guard held < limits.maximumConnectionsPerUser else {
                return .failure(VarlinkConnectionRefused(quota: .connectionsPerUser(limit: limits.maximumConnectionsPerUser)))
            }
            self.byUser[uid] = held + 1
        }
        self.total += 1
        return .success(Ticket(uid: uid))
    }

    /// A counted connection closed.
    mutating func release(_ ticket: Ticket) {
        self.total -= 1
        if let uid = ticket.uid {
            let held = self.byUser[uid, default: 1] - 1
            self.byUser[uid] = held > 0 ? held : nil
        }
    }
}

/// A connection turned away, and by which quota.
struct VarlinkConnectionRefused: Error, Hashable {
    var quota: VarlinkConnectionQuota
}
