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
    public static let reservedPrefix = "lifecycle."
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
        guard !value.hasPrefix(Self.reservedPrefix) else { throw fail("lifecycle.* kinds are the daemon's own") }
        self.value = value
    }

    public var description: String { self.value }
    public static func < (lhs: EventKind, rhs: EventKind) -> Bool { lhs.value < rhs.value }
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
}
