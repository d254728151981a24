public import CoalesceCore
public import Varlink

/// What an app declares about one kind of event: how its posts are held while the app is suspended, and whether
/// they are kept on disk or may wake the app. The client library sends it in Register's `kinds`, and the daemon
/// reads it there and keeps it in its store, in one form (the interface's `Policy` type).
public struct KindDeclaration: Sendable, Hashable {
    public var policy: CoalescingPolicy
    /// Held and delivered in memory only: posts are answered without waiting for the disk, and are lost if the
    /// daemon stops.
    public var volatile: Bool
    /// One of the app's background modes: a post of this kind launches the app into the background when it is
    /// not running, instead of waiting for it to be opened.
    public var backgroundMode: String?
    /// What a post of this kind does to the app while it is suspended (the sender's content-available): `nil`, it
    /// waits there until the app runs again.
    public var wakes: KindWake?

    /// The longest background mode name the wire form takes, in bytes.
    public static let maximumModeLength = 64

    public init(_ policy: CoalescingPolicy = .latest, volatile: Bool = false, backgroundMode: String? = nil, wakes: KindWake? = nil) {
        self.policy = policy
        self.volatile = volatile
        self.backgroundMode = backgroundMode
        self.wakes = wakes
    }

    /// The policy's members, with `volatile`, `backgroundMode` and `wakes` only when they say something.
    public var wire: JSONValue {
        var members = self.policy.wire.objectValue ?? [:]
        if self.volatile { members["volatile"] = true }
        if let mode = self.backgroundMode { members["backgroundMode"] = .string(mode) }
        if let wakes = self.wakes { members["wakes"] = .string(wakes.rawValue) }
        return .object(members)
    }

    /// Reads the wire form (``wire``); `volatile` and `backgroundMode` may also be null. `nil` when any member is
    /// not what the interface declares.
    public init?(wire value: JSONValue) {
        guard case .success(let declaration) = Self.reading(wire: value) else { return nil }
        self = declaration
    }

    /// Reads the wire form (``wire``), or says why it is not a kind's declaration, in the words
    /// ``PolicyProblem/wire`` uses for its policy.
    public static func reading(wire value: JSONValue) -> Result<KindDeclaration, WireFormError> {
        let policy: CoalescingPolicy
        switch CoalescingPolicy.reading(wire: value) {
        case .success(let read): policy = read
        case .failure(let problem): return .failure(WireFormError(problem.wire))
        }
        var declaration = KindDeclaration(policy)
        switch value["volatile"] {
        case nil, .null?, .bool(false)?: break
        case .bool(true)?: declaration.volatile = true
        default: return .failure(WireFormError("volatile is true or false"))
        }
        switch value["backgroundMode"] {
        case nil, .null?: break
        case .string(let mode)? where !mode.isEmpty && mode.utf8.count <= Self.maximumModeLength:
            declaration.backgroundMode = mode
        default: return .failure(WireFormError("a background mode is 1 to \(Self.maximumModeLength) bytes"))
        }
        switch value["wakes"] {
        case nil, .null?: break
        case .string(let name)?:
            guard let wakes = KindWake(rawValue: name) else {
                return .failure(WireFormError("wakes is \"background\" (a post wakes the suspended app into the background), not \(JSONValue.string(name).jsonText)"))
            }
            declaration.wakes = wakes
        default: return .failure(WireFormError("wakes is a string: \"background\""))
        }
        return .success(declaration)
    }
}

/// Where a post of a kind takes its suspended app.
public enum KindWake: String, Sendable, Hashable, CaseIterable {
    /// Into the background, for the events it holds: the app runs without coming to the foreground, and is
    /// suspended again once it has acknowledged them and closed its tasks, or when its budget runs out.
    case background
}

/// Why a value is not the wire form it was read as: a reason for a person, such as
/// `queue needs a bound, such as 10`.
public struct WireFormError: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String
    public var description: String { self.reason }

    public init(_ reason: String) { self.reason = reason }
}
