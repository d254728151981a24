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

    /// Reads the wire form (``wire``); a member left out (or an `anyone` that is not a boolean) declares nothing.
    /// `nil` when it is not an object, or a uid or a group is not one.
    public init?(wire value: JSONValue) {
        guard let object = value.objectValue else { return nil }
        self.init(anyone: object["anyone"]?.boolValue ?? false)
        for uid in object["uids"]?.arrayValue ?? [] {
            guard let number = uid.intValue, let value = UInt32(exactly: number) else { return nil }
            self.uids.append(value)
        }
        for group in object["groups"]?.arrayValue ?? [] {
            guard let name = group.stringValue else { return nil }
            self.groups.append(name)
        }
    }
}
