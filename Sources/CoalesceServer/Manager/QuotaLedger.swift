import CoalesceCore
import Systemd

/// What each user's apps take against the quotas (`[Quotas]`): the apps a user registered, and the bytes their
/// events take in memory (each inbox's ``Inbox/footprint``), per user and in all. The inbox refuses a post past
/// its ``Allowance``, which this ledger works out; the manager charges the ledger whatever an inbox input changed.
///
/// References kept in the manager's state and touched only under its lock: the manager reaches them while it holds
/// one app's record, which a value in the same state could not be, and each record keeps its owner's ``Account``,
/// so that a post looks nothing up. Their properties are not checked for exclusive access at run time: the lock
/// gives it, and the check costs more than the rest of a post's accounting.
final class QuotaLedger: @unchecked Sendable {
    /// One user's apps and what their events take.
    final class Account: @unchecked Sendable {
        let uid: UInt32
        @exclusivity(unchecked) var apps = 0
        @exclusivity(unchecked) var bytes = 0
        /// Root, the daemon's own user, or a member of `AdminGroup=` (as the kernel said when it registered, or
        /// the user database at start-up): the administrators' quotas.
        @exclusivity(unchecked) var admin: Bool

        init(uid: UInt32, admin: Bool) {
            self.uid = uid
            self.admin = admin
        }
    }

    @exclusivity(unchecked) private var accounts: [UInt32: Account] = [:]
    /// The bytes every app's events take in memory.
    @exclusivity(unchecked) private(set) var bytes = 0
    @exclusivity(unchecked) var quotas: Quotas

    init(quotas: Quotas) {
        self.quotas = quotas
    }

    /// `uid`'s account, opened on first use.
    func account(of uid: UInt32) -> Account {
        if let account = self.accounts[uid] { return account }
        let account = self.usage(of: uid)
        self.accounts[uid] = account
        return account
    }

    /// `uid`'s account as it stands, without opening one (a user with no app has an empty one).
    func usage(of uid: UInt32) -> Account {
        self.accounts[uid] ?? Account(uid: uid, admin: uid == 0 || uid == CurrentProcess.effectiveUserID)
    }

    /// The quota on the bytes an account's apps' events take.
    func heldBytesQuota(of account: Account) -> Quota {
        account.admin
            ? Quota(name: "AdminHeldBytes", limit: self.quotas.adminHeldBytes, uid: account.uid)
            : Quota(name: "UserHeldBytes", limit: self.quotas.userHeldBytes, uid: account.uid)
    }

    /// The daemon's ceiling on the bytes every app's events take.
    var heldBytesCeiling: Quota { Quota(name: "HeldBytes", limit: self.quotas.heldBytes) }

    /// The quota on the apps an account may register.
    func appsQuota(of account: Account) -> Quota {
        account.admin
            ? Quota(name: "AdminApps", limit: self.quotas.adminApps, uid: account.uid)
            : Quota(name: "UserApps", limit: self.quotas.userApps, uid: account.uid)
    }

    /// What an app of `account`'s, whose events take `footprint` bytes now, may take in all: what it has, and
    /// what is left of its owner's quota or of the daemon's ceiling, whichever is less.
    func allowance(_ account: Account, footprint: Int) -> Allowance {
        let userLimit = account.admin ? self.quotas.adminHeldBytes : self.quotas.userHeldBytes
        let userRoom = userLimit - account.bytes
        let ceilingRoom = self.quotas.heldBytes - self.bytes
        return userRoom <= ceilingRoom
            ? Allowance(bytes: footprint + userRoom, quota: self.heldBytesQuota(of: account))
            : Allowance(bytes: footprint + ceilingRoom, quota: self.heldBytesCeiling)
    }

    /// An app of `account`'s events now take `change` bytes more (or fewer).
    @inline(__always)
    func charge(_ account: Account, _ change: Int) {
        guard change != 0 else { return }
        account.bytes += change
        self.bytes += change
    }

    /// Whether `uid` is in `group`, by the user database: for the owners of apps loaded at start-up, before the
    /// daemon serves (a lookup that may be slow or remote never runs on an event loop).
    static func isMember(_ uid: UInt32, of group: AdminGroup) -> Bool {
        guard let groups = Self.groups(of: uid) else { return false }
        return groups.primary == group.id || groups.all.contains(group.id)
    }

    /// A user's primary group and every group it is in, by the user database; `nil` for a uid it does not know.
    /// May be slow or remote: never called on an event loop.
    static func groups(of uid: UInt32) -> (primary: UInt32, all: [UInt32])? {
        UserDatabase.groups(ofUser: uid)
    }
}
