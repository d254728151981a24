public import Varlink

/// Who may post to an app besides its own user and root, as Register's `posters` and the daemon's store write it:
/// the client library sends it, the daemon reads it and resolves the group names.
public struct Posters: Sendable, Hashable {
    public var anyone: Bool
    public var uids: [UInt32]
    /// Group names: a poster whose process has one of them (primary or supplementary) may post.
    public var groups: [String]

    public init(anyone: Bool = false, uids: [UInt32] = [], groups: [String] = []) {
        self.anyone = anyone
        self.uids = uids
        self.groups = groups
    }

    public var wire: JSONValue {
        ["anyone": .bool(self.anyone), "uids": .array(self.uids.map { .int(Int64($0)) }), "groups": .array(self.groups.map { .string($0) })]
    }

    /// Reads the wire form (``wire``); a member left out (or null) declares nothing. `nil` when it is not an object,
    /// `anyone` is not a boolean, or `uids` and `groups` are not arrays of uids and of names.
    public init?(wire value: JSONValue) {
        guard let object = value.objectValue else { return nil }
        switch object["anyone"] {
        case nil, .null?: self.init()
        case .bool(let anyone)?: self.init(anyone: anyone)
        default: return nil
        }
        guard let uids = Self.elements(object["uids"]), let groups = Self.elements(object["groups"]) else { return nil }
        for uid in uids {
            guard case .int(let number) = uid, let value = UInt32(exactly: number) else { return nil }
            self.uids.append(value)
        }
        for group in groups {
            guard let name = group.stringValue else { return nil }
            self.groups.append(name)
        }
    }

    /// An array member's elements: none when it is left out or null, `nil` when it is not an array.
    private static func elements(_ member: JSONValue?) -> [JSONValue]? {
        guard let member, member != .null else { return [] }
        return member.arrayValue
    }
}
