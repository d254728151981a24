import Testing

@testable import Varlink

/// Which connections are let in, step by step, without a server: each row is a connection that comes (or one
/// that closes) and what the quotas say.
@Suite struct ConnectionAdmissionTests {
    /// Who connects.
    enum Peer: CustomStringConvertible {
        case user(UInt32)
        /// The kernel could not say: only the totals apply.
        case unknown
        case privileged

        var uid: UInt32? {
            guard case .user(let uid) = self else { return nil }
            return uid
        }

        var isPrivileged: Bool {
            guard case .privileged = self else { return false }
            return true
        }

        var description: String {
            switch self {
            case .user(let uid): return "uid \(uid)"
            case .unknown: return "an unknown peer"
            case .privileged: return "a privileged peer"
            }
        }
    }

    enum Step {
        /// `peer` connects, and is let in (`nil`) or refused by the quota.
        case connects(Peer, refusedBy: VarlinkConnectionQuota?)
        /// The connection let in at row `row` (counted from 0) closes.
        case closes(row: Int)
    }

    /// Runs the steps in order, checking each; returns the admission as they leave it.
    @discardableResult
    func run(_ limits: VarlinkServerLimits, _ steps: [Step]) -> VarlinkConnectionAdmission {
        var admission = VarlinkConnectionAdmission()
        var tickets: [Int: VarlinkConnectionAdmission.Ticket] = [:]
        for (row, step) in steps.enumerated() {
            switch step {
            case .connects(let peer, let quota):
                let before = (admission.total, admission.byUser)
                switch admission.admit(uid: peer.uid, privileged: peer.isPrivileged, limits: limits) {
                case .success(let ticket):
                    #expect(quota == nil, "row \(row): \(peer) let in")
                    tickets[row] = ticket
                case .failure(let refused):
                    #expect(refused.quota == quota, "row \(row): \(peer) refused by \(refused.quota)")
                    #expect(
                        admission.total == before.0 && admission.byUser == before.1,
                        "row \(row): a refusal counts nothing"
                    )
                }
            case .closes(let admitted):
                guard let ticket = tickets.removeValue(forKey: admitted) else {
                    Issue.record("row \(row): row \(admitted) let no connection in")
                    continue
                }
                admission.release(ticket)
            }
        }
        return admission
    }

    @Test func aUserIsBoundByItsQuotaAndEveryoneButThePrivilegedByTheSharedPart() {
        // 4 in all, 1 of them reserved: 3 shared, 2 at most for one uid.
        let limits = VarlinkServerLimits(maximumConnections: 4, maximumConnectionsPerUser: 2, reservedConnections: 1)
        let admission = self.run(
            limits,
            [
                .connects(.user(1000), refusedBy: nil),
                .connects(.user(1000), refusedBy: nil),
                .connects(.user(1000), refusedBy: .connectionsPerUser(limit: 2)),
                .connects(.user(1001), refusedBy: nil),
                .connects(.unknown, refusedBy: .connections(limit: 3)),
                .connects(.privileged, refusedBy: nil),
                .connects(.privileged, refusedBy: .connections(limit: 4)),
                // The privileged peer's connection counts in the total: a user's closing makes no room while the
                // shared part is full with it.
                .closes(row: 0),
                .connects(.user(1000), refusedBy: .connections(limit: 3)),
                .closes(row: 5),
                .connects(.user(1000), refusedBy: nil),
                .connects(.user(1000), refusedBy: .connections(limit: 3)),
                .closes(row: 3),
                .connects(.user(1000), refusedBy: .connectionsPerUser(limit: 2)),
                .connects(.user(1001), refusedBy: nil),
            ]
        )
        #expect(admission.total == 3)
        #expect(admission.byUser == [1000: 2, 1001: 1])
    }

    @Test func anUnknownPeerCountsOnlyInTheTotals() {
        let limits = VarlinkServerLimits(maximumConnections: 3, maximumConnectionsPerUser: 1, reservedConnections: 0)
        let admission = self.run(
            limits,
            [
                .connects(.unknown, refusedBy: nil),
                .connects(.unknown, refusedBy: nil),
                .connects(.user(1000), refusedBy: nil),
                .connects(.unknown, refusedBy: .connections(limit: 3)),
                .closes(row: 0),
                .connects(.unknown, refusedBy: nil),
            ]
        )
        #expect(admission.total == 3)
        #expect(admission.byUser == [1000: 1])
    }

    /// A reserve larger than the whole leaves nothing shared, and the privileged still get in.
    @Test func aReserveBeyondTheTotalLeavesOnlyThePrivileged() {
        let limits = VarlinkServerLimits(maximumConnections: 2, maximumConnectionsPerUser: 2, reservedConnections: 5)
        self.run(
            limits,
            [
                .connects(.user(1000), refusedBy: .connections(limit: 0)),
                .connects(.privileged, refusedBy: nil),
                .connects(.privileged, refusedBy: nil),
                .connects(.privileged, refusedBy: .connections(limit: 2)),
            ]
        )
    }
}
