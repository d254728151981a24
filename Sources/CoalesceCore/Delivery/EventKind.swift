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
/// `lifecycle.` are the daemon's own callbacks and cannot be posted.
public struct EventKind: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let maximumLength = 128
    public static let reservedPrefix: StaticString = "lifecycle."
    public let value: String

    public init(_ value: String) throws(EventKindError) {
        func fail(_ reason: String) -> EventKindError { EventKindError(kind: value, reason: reason) }
        guard !value.isEmpty else { throw fail("empty") }
        guard value.utf8.count <= Self.maximumLength else { throw fail("longer than \(Self.maximumLength) bytes") }
        switch DottedName.labels(of: value) {
        case .success: break
        case .failure(.emptyLabel): throw fail("empty label between dots")
        case .failure(.badStart): throw fail("each label starts with a lower-case letter or digit")
        case .failure(.badCharacter): throw fail("only lower-case letters, digits, '-' and '_' between the dots")
        }
        // By bytes: the labels are ASCII by now.
        guard !value.startsWithBytes(of: Self.reservedPrefix) else { throw fail("lifecycle.* kinds are the daemon's own") }
        self.value = value
    }

    public var description: String { self.value }
    public static func < (lhs: EventKind, rhs: EventKind) -> Bool { lhs.value < rhs.value }
}

/// Why a command line's policy text is not a policy.
public struct PolicyTextError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// How the posts of one kind are folded while the app is suspended (DESIGN.md §3).
public enum CoalescingPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The last payload, and the count. The default.
    case latest
    /// The first payload, and the count.
    case first
    /// Nothing but the count.
    case count
    /// The running sum of one numeric member of the payloads (a badge).
    case sum(field: String)
    /// The payloads' members merged, later posts winning member by member.
    case merge
    /// The latest payload, or nothing at all when it equals what the app last received before it was suspended.
    case netChange
    /// Every payload, at most `bound`; past it the oldest are dropped and counted, and an overflow marker follows.
    case queue(bound: Int)

    /// Reads a policy as command lines take it: `latest`, `first`, `count`, `sum:FIELD`, `merge`, `netChange` or
    /// `queue:BOUND`.
    /// - Throws: ``PolicyTextError`` saying what is wrong.
    public init(parsing text: String) throws(PolicyTextError) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let argument = parts.count == 2 ? parts[1] : nil
        switch (parts.first, argument) {
        case ("latest"?, nil): self = .latest
        case ("first"?, nil): self = .first
        case ("count"?, nil): self = .count
        case ("merge"?, nil): self = .merge
        case ("netChange"?, nil): self = .netChange
        case ("sum"?, let field?) where !field.isEmpty: self = .sum(field: field)
        case ("queue"?, let bound?):
            guard let bound = Int(bound), bound >= 1 else { throw PolicyTextError("queue:BOUND needs a positive number, such as queue:10") }
            self = .queue(bound: bound)
        case ("sum"?, _): throw PolicyTextError("sum needs the member to add up, such as sum:unread")
        case ("queue"?, _): throw PolicyTextError("queue needs a bound, such as queue:10")
        default:
            throw PolicyTextError("'\(text)' is not a policy: latest, first, count, sum:FIELD, merge, netChange or queue:BOUND")
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

    public var description: String {
        switch self {
        case .latest: return "latest"
        case .first: return "first"
        case .count: return "count"
        case .sum(let field): return "sum(\(field))"
        case .merge: return "merge"
        case .netChange: return "netChange"
        case .queue(let bound): return "queue(\(bound))"
        }
    }
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
