/// A JSON object's members, kept in the order they were first written.
///
/// Not a `Dictionary`: a Varlink call's parameters and an event's payload are a handful of members, read once or
/// twice, and hashing each name (allocating a hash table, then freeing it) was a fifth of the daemon's work per
/// post. Here a small object is an array searched in place. A large one (a peer may send a hundred thousand members
/// in one message) gets a table of positions too, so that no operation turns quadratic.
///
/// Equality and hashing ignore order, as JSON's do; a name set twice keeps the later value.
public struct JSONObject: Sendable {
    public typealias Element = (key: String, value: JSONValue)

    /// A stored member: a struct rather than the `Element` tuple, whose copies and destruction go through the
    /// runtime's generic tuple code.
    struct Member: Sendable {
        var key: String
        var value: JSONValue
    }

    private var members: [Member] = []
    /// Where each name sits in `members`; only once there are more than `indexedFrom` of them.
    private var positions: [String: Int]?

    /// Up to this many members a search beats hashing the name.
    private static let indexedFrom = 16

    public init() {}

    /// An object of these members; a repeated name keeps its first place and its last value.
    public init<Members: Sequence<(String, JSONValue)>>(_ members: Members) {
        for (key, value) in members { self[key] = value }
    }

    public var count: Int { self.members.count }
    public var isEmpty: Bool { self.members.isEmpty }
    public var keys: [String] { self.members.map(\.key) }
    public var values: [JSONValue] { self.members.map(\.value) }

    /// Makes room for `count` members before they are added one by one.
    public mutating func reserveCapacity(_ count: Int) {
        self.members.reserveCapacity(count)
    }

    private func position(of key: String) -> Int? {
        if let positions = self.positions { return positions[key] }
        // Lengths first: they are stored, and telling two different names apart with `==` costs a call.
        let length = key.utf8.count
        return self.members.firstIndex { $0.key.utf8.count == length && $0.key == key }
    }

    /// The member named `key` when it is a string, read in place: cheaper than `self[key]?.stringValue`, which
    /// copies the value out first.
    public func string(_ key: String) -> String? {
        guard let position = self.position(of: key) else { return nil }
        // Matched here first: `stringValue` on the element copies the whole value out (about 240 instructions a
        // post more, counted); text kept as sent goes through it.
        if case .string(let value) = self.members[position].value { return value }
        return self.members[position].value.stringValue
    }

    public subscript(key: String) -> JSONValue? {
        get {
            guard let position = self.position(of: key) else { return nil }
            return self.members[position].value
        }
        set {
            switch (self.position(of: key), newValue) {
            case (let position?, let value?):
                self.members[position].value = value
            case (nil, let value?):
                self.append(key, value)
            case (let position?, nil):
                self.members.remove(at: position)
                self.positions = nil
                self.indexIfLarge()
            case (nil, nil):
                break
            }
        }
    }

    /// Adds a member whose name is known not to be here yet.
    /// Takes its arguments: a parsed member moves into place rather than being copied and then freed.
    private mutating func append(_ key: consuming String, _ value: consuming JSONValue) {
        if self.positions != nil { self.positions![copy key] = self.members.count }
        self.members.append(Member(key: key, value: value))
        self.indexIfLarge()
    }

    private mutating func indexIfLarge() {
        guard self.positions == nil, self.members.count > Self.indexedFrom else { return }
        var positions: [String: Int] = [:]
        positions.reserveCapacity(self.members.count)
        for (position, member) in self.members.enumerated() { positions[member.key] = position }
        self.positions = positions
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        let old = self[key]
        self[key] = nil
        return old
    }

    public func mapValues(_ transform: (JSONValue) throws -> JSONValue) rethrows -> JSONObject {
        var mapped = self
        for position in mapped.members.indices {
            mapped.members[position].value = try transform(mapped.members[position].value)
        }
        return mapped
    }

    /// This object with `other`'s members added; where both have a name, `combine` picks the value.
    public func merging(
        _ other: JSONObject,
        uniquingKeysWith combine: (JSONValue, JSONValue) throws -> JSONValue
    ) rethrows -> JSONObject {
        var merged = self
        for (key, value) in other {
            if let position = merged.position(of: key) {
                merged.members[position].value = try combine(merged.members[position].value, value)
            } else {
                merged.append(key, value)
            }
        }
        return merged
    }

    /// Calls `body` with the members where they are stored: for a pass over every call's parameters
    /// (``VarlinkParameterCheck``), which reads each member without copying it out.
    func withMembers<Result>(_ body: (UnsafeBufferPointer<Member>) -> Result) -> Result {
        self.members.withUnsafeBufferPointer(body)
    }

    /// Visits the members ordered by name, as they are written out; those built or received in order (most of
    /// them) are visited where they are, without sorting a copy.
    public func forEachByKey(_ body: (String, JSONValue) throws -> Void) rethrows {
        var position = 1
        while position < self.members.count, self.members[position - 1].key < self.members[position].key {
            position += 1
        }
        let inOrder = position >= self.members.count ? self.members : self.members.sorted { $0.key < $1.key }
        for member in inOrder { try body(member.key, member.value) }
    }
}

extension JSONObject: Sequence {
    public struct Iterator: IteratorProtocol {
        fileprivate var members: IndexingIterator<[Member]>

        public mutating func next() -> Element? {
            self.members.next().map { ($0.key, $0.value) }
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(members: self.members.makeIterator())
    }

    public var underestimatedCount: Int { self.members.count }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }
}

extension JSONObject: Hashable {
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.members.allSatisfy { member in rhs[member.key] == member.value }
    }

    public func hash(into hasher: inout Hasher) {
        // Each member hashed on its own and the results added: the same whatever the order.
        var sum = 0
        for member in self.members {
            var hasher = Hasher()
            hasher.combine(member.key)
            hasher.combine(member.value)
            sum &+= hasher.finalize()
        }
        hasher.combine(self.members.count)
        hasher.combine(sum)
    }
}

extension JSONObject: CustomStringConvertible {
    public var description: String { JSONValue.object(self).jsonText }
}
