import CoalesceCore
import CoalesceWire
import Varlink

/// What an app declares about itself when it registers: the parameters of `io.coalesced.App.Register`.
public struct AppDeclaration: Sendable, Hashable {
    /// Reverse-DNS, such as `org.example.mail`.
    public var name: String
    /// Background modes (audio, voip, …): with any, the app is not suspended in the background.
    public var backgroundModes: [String]
    /// Instead of being suspended the app is told willTerminate and terminated.
    public var exitsOnSuspend: Bool
    /// A systemd service that launches the app; only an administrator may set one.
    public var launchUnit: String?
    /// How the app is kept from running code while it is suspended; `nil` keeps what it declared before (for a new
    /// app: the daemon's configuration, which freezes or stops it unless an operator chose otherwise).
    public var suspension: Suspension?
    /// How each event kind is held while the app is suspended; kinds not named are ``CoalescingPolicy/latest``.
    /// `nil` keeps what the app declared before; `[:]` clears it.
    public var kinds: [String: KindDeclaration]?
    /// Who may post to the app besides its own user and root; `nil` keeps what it declared before.
    public var posters: Posters?
    /// Topics the app subscribes to; `nil` keeps what it declared before.
    public var topics: [String]?

    public init(
        name: String,
        backgroundModes: [String] = [],
        exitsOnSuspend: Bool = false,
        launchUnit: String? = nil,
        suspension: Suspension? = nil,
        kinds: [String: KindDeclaration]? = nil,
        posters: Posters? = nil,
        topics: [String]? = nil
    ) {
        self.name = name
        self.backgroundModes = backgroundModes
        self.exitsOnSuspend = exitsOnSuspend
        self.launchUnit = launchUnit
        self.suspension = suspension
        self.kinds = kinds
        self.posters = posters
        self.topics = topics
    }

    /// Register's parameters.
    var registerParameters: JSONObject {
        var parameters: JSONObject = [
            "name": .string(self.name),
            "backgroundModes": .array(self.backgroundModes.map { .string($0) }),
            "exitsOnSuspend": .bool(self.exitsOnSuspend),
            "launchUnit": self.launchUnit.map { .string($0) } ?? .null,
        ]
        if let suspension = self.suspension { parameters["suspension"] = .string(suspension.rawValue) }
        if let kinds = self.kinds {
            parameters["kinds"] = .object(JSONObject(kinds.sorted { $0.key < $1.key }.map { ($0.key, $0.value.wire) }))
        }
        if let posters = self.posters { parameters["posters"] = posters.wire }
        if let topics = self.topics { parameters["topics"] = .array(topics.map { .string($0) }) }
        return parameters
    }
}

extension AppDeclaration {
    /// How a suspended app is kept from running code.
    public enum Suspension: String, Sendable, Hashable, CaseIterable {
        /// Its launch unit frozen by systemd's cgroup freezer when its process runs in it, its process stopped
        /// (SIGSTOP) otherwise. The daemon's default.
        case freeze
        /// Its process stopped with SIGSTOP.
        case stop
        /// Nothing done to its process: it is trusted to run no code while suspended (an app that must keep a
        /// connection alive, or one under a debugger).
        case cooperative
    }
}

/// How the posts of one kind are folded while the app is suspended.
public enum CoalescingPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The last payload, and the count. The default.
    case latest
    /// The first payload, and the count.
    case first
    /// Nothing but the count: the event has no payload.
    case count
    /// The running sum of one numeric member of the payloads (a badge): `{field: sum}`.
    case sum(field: String)
    /// The payloads' members merged, later posts winning member by member.
    case merge
    /// The latest payload, or nothing at all when it equals what the app last received before it was suspended.
    case netChange
    /// Every payload, at most `bound` (1 to 10,000); past it the oldest are dropped, and an overflow marker
    /// (``Event/dropped``) follows them.
    case queue(bound: Int)

    /// Reads a policy as command lines write it: `latest`, `first`, `count`, `sum:FIELD`, `merge`, `netChange` or
    /// `queue:BOUND`.
    /// - Throws: ``PolicyTextError`` saying what is wrong.
    public init(parsing text: String) throws(PolicyTextError) {
        do {
            self.init(try CoalesceCore.CoalescingPolicy(parsing: text))
        } catch {
            throw PolicyTextError(text: text, reason: "\(error)")
        }
    }

    init(_ policy: CoalesceCore.CoalescingPolicy) {
        switch policy {
        case .latest: self = .latest
        case .first: self = .first
        case .count: self = .count
        case .sum(let field): self = .sum(field: field)
        case .merge: self = .merge
        case .netChange: self = .netChange
        case .queue(let bound): self = .queue(bound: bound)
        }
    }

    /// The policy as command lines write it, which ``init(parsing:)`` reads back: `sum:unread`, `queue:10`.
    public var description: String {
        switch self {
        case .latest: return "latest"
        case .first: return "first"
        case .count: return "count"
        case .sum(let field): return "sum:" + field
        case .merge: return "merge"
        case .netChange: return "netChange"
        case .queue(let bound): return "queue:\(bound)"
        }
    }

    /// The daemon's own form, whose wire form the library sends.
    var core: CoalesceCore.CoalescingPolicy {
        switch self {
        case .latest: return .latest
        case .first: return .first
        case .count: return .count
        case .sum(let field): return .sum(field: field)
        case .merge: return .merge
        case .netChange: return .netChange
        case .queue(let bound): return .queue(bound: bound)
        }
    }
}

/// Text that is not a policy, for ``CoalescingPolicy/init(parsing:)``.
public struct PolicyTextError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text given.
    public var text: String
    /// What is wrong with it, and what a policy looks like.
    public var reason: String
    public var description: String { self.reason }
}

/// What an app declares about one kind of event: how its posts are held while the app is suspended, and whether
/// they are kept on disk or may launch the app.
public struct KindDeclaration: Sendable, Hashable {
    public var policy: CoalescingPolicy
    /// Held and delivered in memory only: posts are answered without waiting for the disk, and are lost if the
    /// daemon stops. For values that are stale a moment later.
    public var volatile: Bool
    /// One of the app's background modes: a post of this kind launches the app into the background when it is
    /// not running.
    public var backgroundMode: String?

    public init(_ policy: CoalescingPolicy = .latest, volatile: Bool = false, backgroundMode: String? = nil) {
        self.policy = policy
        self.volatile = volatile
        self.backgroundMode = backgroundMode
    }

    /// The interface's `Policy` type.
    var wire: JSONValue {
        CoalesceWire.KindDeclaration(self.policy.core, volatile: self.volatile, backgroundMode: self.backgroundMode).wire
    }
}

/// Who may post to an app besides its own user and root.
public struct Posters: Sendable, Hashable {
    /// Anyone who can connect to the daemon.
    public var anyone: Bool
    /// These users.
    public var uids: [UInt32]
    /// The members of these groups, by name.
    public var groups: [String]

    public init(anyone: Bool = false, uids: [UInt32] = [], groups: [String] = []) {
        self.anyone = anyone
        self.uids = uids
        self.groups = groups
    }

    var wire: JSONValue {
        CoalesceWire.Posters(anyone: self.anyone, uids: self.uids, groups: self.groups).wire
    }
}
