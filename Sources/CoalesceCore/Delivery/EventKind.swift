/// Why a string is not an event kind.
public struct EventKindError: Error, Sendable, Hashable, CustomStringConvertible {
    public var kind: String
    public var reason: String
    public var description: String { "'\(self.kind)' is not an event kind: \(self.reason)" }

    public init(kind: String, reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

/// What an event is about, such as `mail.received`: the unit of coalescing (one event per kind on wake).
///
/// The grammar, bounded so that kinds are cheap to store and safe to print: 1 to 128 bytes; labels separated by
/// dots; each label lower-case ASCII letters, digits, `-` and `_`, starting with a letter or digit. Kinds under
/// `lifecycle.`, `notification.` and `system.` are the daemon's own (callbacks, notifications, the system's
/// changes) and cannot be posted.
public struct EventKind: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let maximumLength = 128
    public static let reservedPrefix: StaticString = "lifecycle."
    public static let notificationPrefix: StaticString = "notification."
    public static let systemPrefix: StaticString = "system."
    public let value: String

    public init(_ value: String) throws(EventKindError) {
        func fail(_ reason: String) -> EventKindError { EventKindError(kind: value, reason: reason) }
        try Self.checkGrammar(value)
        // By bytes: the labels are ASCII by now.
        guard !value.startsWithBytes(of: Self.reservedPrefix) else { throw fail("lifecycle.* kinds are the daemon's own") }
        guard !value.startsWithBytes(of: Self.notificationPrefix) else {
            throw fail("notification.* kinds are the daemon's own")
        }
        guard !value.startsWithBytes(of: Self.systemPrefix) else { throw fail("system.* kinds are the daemon's own") }
        self.value = value
    }

    /// A kind as the daemon wrote it to its store: any kind a client may post, and the daemon's own
    /// (`notification.willPresent`, `system.clockChanged`, `lifecycle.…`), which it holds and sends like any other.
    public init(stored value: String) throws(EventKindError) {
        if !Self.isDaemonKind(value) { try Self.checkGrammar(value) }
        self.value = value
    }

    /// Whether `value` is shaped as the daemon's own kinds are: a reserved prefix, then one camel-case name of ASCII
    /// letters and digits (`notification.willPresent`).
    private static func isDaemonKind(_ value: String) -> Bool {
        let prefixes = [Self.reservedPrefix, Self.notificationPrefix, Self.systemPrefix]
        guard let prefix = prefixes.first(where: { value.startsWithBytes(of: $0) }) else { return false }
        let name = value.utf8.dropFirst(prefix.utf8CodeUnitCount)
        guard let first = name.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"), name.count <= Self.maximumLength
        else { return false }
        return name.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
        }
    }

    private static func checkGrammar(_ value: String) throws(EventKindError) {
        func fail(_ reason: String) -> EventKindError { EventKindError(kind: value, reason: reason) }
        guard !value.isEmpty else { throw fail("empty") }
        guard value.utf8.count <= Self.maximumLength else { throw fail("longer than \(Self.maximumLength) bytes") }
        switch DottedName.labels(of: value) {
        case .success: break
        case .failure(.emptyLabel): throw fail("empty label between dots")
        case .failure(.badStart): throw fail("each label starts with a lower-case letter or digit")
        case .failure(.badCharacter): throw fail("only lower-case letters, digits, '-' and '_' between the dots")
        }
    }

    /// One of the daemon's own kinds (`notification.willPresent`), which no client may post.
    public init(daemonKind value: StaticString) {
        self.value = value.description
    }

    public var description: String { self.value }
    public static func < (lhs: EventKind, rhs: EventKind) -> Bool { lhs.value < rhs.value }
}

/// Text that is not a policy, for ``CoalescingPolicy/init(parsing:)``.
public struct PolicyTextError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text given.
    public var text: String
    /// What is wrong with it, and what a policy looks like.
    public var reason: String
    public var description: String { self.reason }

    init(text: String, reason: String) {
        self.text = text
        self.reason = reason
    }
}

/// Why a policy, as a command line or the interface writes it, is not one: the one place its reasons are worded, so
/// that coalescectl and the daemon give the same reason, each in the notation of the form it read.
public enum PolicyProblem: Error, Sendable, Hashable {
    /// No policy named (the interface's `policy` member is missing).
    case missing
    /// A name that is not a policy.
    case unknown(String)
    /// `sum` without the member to add up.
    case sumWithoutField
    /// `sum` with a member name longer than ``CoalescingPolicy/maximumFieldLength``.
    case fieldTooLong(Int)
    /// `sum` with a member name holding a control character (its byte): the member's name is a key.
    case fieldHasControlCharacter(UInt8)
    /// `queue` without its bound.
    case queueWithoutBound
    /// `queue` with a bound that is not from 1 to ``CoalescingPolicy/maximumQueueBound`` (its text as given).
    case boundOutOfRange(String)

    /// The reason as a command line writes policies (`sum:FIELD`, `queue:BOUND`).
    public var text: String {
        switch self {
        case .missing: return "no policy named: " + Self.names(sum: "sum:FIELD", queue: "queue:BOUND")
        case .unknown(let name): return "'\(name)' is not a policy: " + Self.names(sum: "sum:FIELD", queue: "queue:BOUND")
        case .sumWithoutField: return "sum needs the member to add up, such as sum:unread"
        case .fieldTooLong(let length): return "sum's member is \(length) bytes; at most \(CoalescingPolicy.maximumFieldLength)"
        case .fieldHasControlCharacter(let byte):
            return "sum's member contains the control character \(ControlCharacters.name(of: byte)); member names take none"
        case .queueWithoutBound: return "queue needs a bound, such as queue:10"
        case .boundOutOfRange(let bound):
            return "queue's bound \(bound) is not a number from 1 to \(CoalescingPolicy.maximumQueueBound), such as queue:10"
        }
    }

    /// The reason as the interface writes policies (`{"policy": "sum", "field": "unread"}`).
    public var wire: String {
        switch self {
        case .missing: return "no policy named: " + Self.names(sum: "sum (with field)", queue: "queue (with bound)")
        case .unknown(let name):
            return "'\(name)' is not a policy: " + Self.names(sum: "sum (with field)", queue: "queue (with bound)")
        case .sumWithoutField: return "sum needs the member to add up in field, such as \"unread\""
        case .fieldTooLong, .fieldHasControlCharacter: return self.text
        case .queueWithoutBound: return "queue needs a bound, such as 10"
        case .boundOutOfRange(let bound):
            return "queue's bound \(bound) is not a number from 1 to \(CoalescingPolicy.maximumQueueBound)"
        }
    }

    private static func names(sum: String, queue: String) -> String {
        "latest, first, count, \(sum), merge, netChange or \(queue)"
    }
}

/// How the posts of one kind are folded while the app is suspended (DESIGN.md §3).
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
    /// Every payload, at most `bound` (1 to ``maximumQueueBound``); past it the oldest are dropped and counted, and
    /// an overflow marker follows them.
    case queue(bound: Int)

    /// Reads a policy as command lines take it: `latest`, `first`, `count`, `sum:FIELD`, `merge`, `netChange` or
    /// `queue:BOUND`.
    /// - Throws: ``PolicyTextError`` saying what is wrong.
    public init(parsing text: String) throws(PolicyTextError) {
        do {
            try self.init(checking: text)
        } catch {
            throw PolicyTextError(text: text, reason: error.text)
        }
    }

    /// The longest `sum` field a policy takes, in bytes.
    public static let maximumFieldLength = 128
    /// The largest `queue` bound a policy takes: a queue holds every payload up to it.
    public static let maximumQueueBound = 10_000

    private init(checking text: String) throws(PolicyProblem) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let argument = parts.count == 2 ? parts[1] : nil
        switch (parts.first, argument) {
        case ("latest"?, nil): self = .latest
        case ("first"?, nil): self = .first
        case ("count"?, nil): self = .count
        case ("merge"?, nil): self = .merge
        case ("netChange"?, nil): self = .netChange
        case ("sum"?, let field?) where !field.isEmpty:
            guard field.utf8.count <= Self.maximumFieldLength else { throw .fieldTooLong(field.utf8.count) }
            if let byte = ControlCharacters.first(in: field) { throw .fieldHasControlCharacter(byte) }
            self = .sum(field: field)
        case ("queue"?, let bound?):
            guard let number = Int(bound), number >= 1, number <= Self.maximumQueueBound else {
                throw .boundOutOfRange(bound)
            }
            self = .queue(bound: number)
        case ("sum"?, _): throw .sumWithoutField
        case ("queue"?, _): throw .queueWithoutBound
        default: throw .unknown(text)
        }
    }

    /// The policy as command lines write it, which ``init(parsing:)`` reads back: `sum:unread`, `queue:10`.
    public var text: String {
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

    /// The policy as command lines write it (``text``): the form an app's programmer and an operator read.
    public var description: String { self.text }
}

/// What the coalescing core needs of a payload; the daemon's JSON objects provide it.
public protocol CoalescablePayload: Sendable, Equatable {
    /// The members of `self` with those of `newer` laid over them, member by member.
    func merged(with newer: Self) -> Self
    /// The number in member `field`, if there is one.
    func number(at field: String) -> Double?
    /// A payload holding `sum` in member `field`: what a sum delivers.
    static func sum(_ sum: Double, at field: String) -> Self
    /// The bytes it stands for (its JSON text): what the quotas on what apps hold count.
    var size: Int { get }
}
