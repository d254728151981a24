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
        guard case .success(let posters) = Self.reading(wire: value) else { return nil }
        self = posters
    }

    /// Reads the wire form (``wire``), or says why it is not posters.
    public static func reading(wire value: JSONValue) -> Result<Posters, WireFormError> {
        guard let object = value.objectValue else { return .failure(WireFormError("posters is an object of anyone, uids and groups")) }
        var posters = Posters()
        switch object["anyone"] {
        case nil, .null?: break
        case .bool(let anyone)?: posters.anyone = anyone
        default: return .failure(WireFormError("anyone is true or false"))
        }
        guard let uids = Self.elements(object["uids"]) else { return .failure(WireFormError("uids is an array of uids")) }
        guard let groups = Self.elements(object["groups"]) else { return .failure(WireFormError("groups is an array of group names")) }
        for uid in uids {
            guard case .int(let number) = uid, let value = UInt32(exactly: number) else {
                return .failure(WireFormError("\(uid.jsonText) is not a uid: uids are from 0 to \(UInt32.max)"))
            }
            posters.uids.append(value)
        }
        for group in groups {
            guard let name = group.stringValue else {
                return .failure(WireFormError("\(group.jsonText) is not a group name"))
            }
            posters.groups.append(name)
        }
        return .success(posters)
    }

    /// An array member's elements: none when it is left out or null, `nil` when it is not an array.
    private static func elements(_ member: JSONValue?) -> [JSONValue]? {
        guard let member, member != .null else { return [] }
        return member.arrayValue
    }
}
