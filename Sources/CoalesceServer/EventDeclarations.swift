import CoalesceCore
import CoalesceWire
import Systemd
import Varlink

/// An event's payload: a JSON object, merged member by member, summed by one numeric member.
struct EventPayload: CoalescablePayload {
    let value: JSONValue
    /// Its JSON text's length in bytes: as sent (a payload kept as its text), or as written out.
    let size: Int

    init(_ value: JSONValue) {
        self.value = value
        if case .text(let text) = value { self.size = text.count } else { self.size = value.jsonText.utf8.count }
    }

    /// Equal by value, however each was written.
    static func == (lhs: EventPayload, rhs: EventPayload) -> Bool { lhs.value == rhs.value }

    func merged(with newer: EventPayload) -> EventPayload {
        guard let base = self.value.objectValue, let overlay = newer.value.objectValue else { return newer }
        return EventPayload(.object(base.merging(overlay) { _, later in later }))
    }

    func number(at field: String) -> Double? {
        self.value[field]?.doubleValue
    }

    static func sum(_ sum: Double, at field: String) -> EventPayload {
        let exact = sum.rounded() == sum && abs(sum) < 9e15
        return EventPayload(.object([field: exact ? .int(Int64(sum)) : .double(sum)]))
    }
}

/// What an app declared about the events it receives: each kind's coalescing policy, and who may post to it
/// besides its own user and root.
struct EventDeclarations: Sendable, Hashable {
    /// The kinds the app declared, each with all it declared about it: one table, so that a post looks its kind up
    /// once, and a registration that leaves `kinds` out keeps all of it.
    var kinds: [EventKind: KindDeclaration] = [:]
    /// Topics the app subscribes to: a post to `topic:NAME` reaches every subscriber that lets the poster post.
    var topics: Set<EventKind> = []
    var posters = Posters()

    /// Who may post to an app besides its owner and root.
    struct Posters: Sendable, Hashable {
        var anyone = false
        var uids: Set<UInt32> = []
        /// Group names with the ids they had at registration.
        var groups: [String: UInt32] = [:]

        /// Whether `peer` may post to an app `owner` owns.
        ///
        /// A group named here counts when the posting process has it, as the kernel says (see
        /// ``Authorization/groups(of:)``), never as the user database does: that may be slow or remote, and would
        /// hold up the posts behind this one.
        func allow(_ peer: VarlinkPeer, owner: UInt32) -> Bool {
            if let settled = self.settled(uid: peer.uid, owner: owner) { return settled }
            let groups = Set(self.groups.values)
            if groups.contains(peer.gid) { return true }
            return Authorization.groups(of: peer).contains { groups.contains($0) }
        }

        /// Whether a poster of `uid` may post, when its uid alone settles it (no groups to look at); `nil` when its
        /// groups decide.
        func settled(uid: UInt32, owner: UInt32) -> Bool? {
            if uid == 0 || uid == owner || self.anyone || self.uids.contains(uid) { return true }
            return self.groups.isEmpty ? false : nil
        }
    }

    /// The first kind (by name) mapped to a background mode that is not among `modes`, with that mode: a kind can
    /// only wake the app into a mode the app declares.
    func undeclaredMode(among modes: Set<String>) -> (kind: EventKind, mode: String)? {
        self.kinds.sorted { $0.key < $1.key }.lazy.compactMap { kind, declaration in
            declaration.backgroundMode.flatMap { modes.contains($0) ? nil : (kind, $0) }
        }.first
    }

    static let maximumKinds = 256

    // MARK: Wire and store

    static let maximumTopics = 64

    /// Reads Register's `kinds`, `posters` and `topics`, already of the types the interface declares (the server
    /// checks that): what is left to refuse here is their content, each with the error of ours that names what is
    /// wrong and why.
    /// - Throws: ``AppError`` (`TooManyDeclared`, `InvalidTopic`, `InvalidKind`, `InvalidPolicy`, `InvalidPosters`);
    ///   `InvalidParameter` for a value not of its declared type, which only the store's text can hold.
    init(kinds: JSONValue?, posters: JSONValue?, topics: JSONValue? = nil) throws {
        if let topics, topics != .null {
            guard let names = topics.arrayValue else { throw VarlinkError.invalidParameter("topics", reason: "expected an array of string") }
            guard names.count <= Self.maximumTopics else {
                throw AppError.tooManyDeclared(parameter: "topics", count: names.count, limit: Self.maximumTopics)
            }
            for (index, name) in names.enumerated() {
                guard let text = name.stringValue else {
                    throw VarlinkError.invalidParameter("topics[\(index)]", reason: "expected a string")
                }
                do {
                    self.topics.insert(try EventKind(text))
                } catch {
                    throw AppError.invalidTopic(topic: text, reason: error.reason)
                }
            }
        }
        if let kinds, kinds != .null {
            guard let members = kinds.objectValue else { throw VarlinkError.invalidParameter("kinds", reason: "expected an object of Policy") }
            guard members.count <= Self.maximumKinds else {
                throw AppError.tooManyDeclared(parameter: "kinds", count: members.count, limit: Self.maximumKinds)
            }
            for (name, declaration) in members {
                let kind: EventKind
                do {
                    kind = try EventKind(name)
                } catch {
                    throw AppError.invalidKind(kind: name, reason: error.reason)
                }
                switch KindDeclaration.reading(wire: declaration) {
                case .success(let declared): self.kinds[kind] = declared
                case .failure(let problem): throw AppError.invalidPolicy(kind: name, reason: problem.reason)
                }
            }
        }
        if let posters, posters != .null {
            let declared: CoalesceWire.Posters
            switch CoalesceWire.Posters.reading(wire: posters) {
            case .success(let read): declared = read
            case .failure(let problem): throw AppError.invalidPosters(reason: problem.reason)
            }
            self.posters.anyone = declared.anyone
            self.posters.uids.formUnion(declared.uids)
            for name in declared.groups {
                guard let id = UserDatabase.groupID(named: name) else {
                    throw AppError.invalidPosters(reason: "no group named \(JSONValue.string(name).jsonText) on this system")
                }
                self.posters.groups[name] = id
            }
        }
    }

    /// Whether any of `kinds` is one the app declared to wake it from suspension.
    func wake(forAnyOf kinds: some Sequence<EventKind>) -> Bool {
        kinds.contains { self.kinds[$0]?.wakes == .background }
    }

    /// A policy as Post's `policy` gives it (``CoalescingPolicy/init(wire:)``), for a post of `kind`.
    /// - Throws: `InvalidPolicy` naming the kind and why.
    static func policy(_ value: JSONValue, kind: String) throws(AppError) -> CoalescingPolicy {
        switch CoalescingPolicy.reading(wire: value) {
        case .success(let policy): return policy
        case .failure(let problem): throw .invalidPolicy(kind: kind, reason: problem.wire)
        }
    }

    /// As the store keeps it: the wire forms Register takes, with the posters' uids and groups in order.
    var json: JSONValue {
        var kinds: JSONObject = [:]
        for (kind, declared) in self.kinds { kinds[kind.value] = declared.wire }
        let posters = CoalesceWire.Posters(
            anyone: self.posters.anyone,
            uids: self.posters.uids.sorted(),
            groups: self.posters.groups.keys.sorted()
        )
        return [
            "kinds": .object(kinds), "posters": posters.wire,
            "topics": .array(self.topics.sorted().map { .string($0.value) }),
        ]
    }

    /// From the store; a group that no longer exists is dropped. `nil` for text that is not declarations as the
    /// daemon writes them: a damaged store, which the daemon does not start on (it would lose the app's policies,
    /// posters and topics).
    init?(stored text: String) {
        guard let value = try? JSONParser.parse(text), value.objectValue != nil else { return nil }
        let groups = value["posters"]?["groups"]?.arrayValue?.filter { $0.stringValue.flatMap { UserDatabase.groupID(named: $0) } != nil }
        var posters = value["posters"]?.objectValue ?? [:]
        posters["groups"] = .array(groups ?? [])
        guard let declarations = try? EventDeclarations(kinds: value["kinds"], posters: .object(posters), topics: value["topics"])
        else { return nil }
        self = declarations
    }

    init() {}
}

/// Held slots and delivered events as the store keeps them (JSON text).
enum EventCoding {
    typealias Queue = EventQueue<EventPayload, Double>

    /// A held slot as its store row keeps it (a queue kind's entries have rows of their own). Written member by
    /// member (every held post rewrites its kind's row, so this is on the path of each post), not through a
    /// dictionary.
    static func encode(_ slot: Queue.Slot) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(192)
        func member(_ name: String, _ value: JSONValue) {
            output.append(output.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            output.append(UInt8(ascii: "\""))
            output.append(contentsOf: name.utf8)
            output.append(contentsOf: "\":".utf8)
            value.write(to: &output)
        }
        member("policy", slot.policy.wire)
        member("count", .int(Int64(slot.count)))
        member("first", .double(slot.first))
        member("last", .double(slot.last))
        switch slot.held {
        case .payload(let payload): member("payload", payload.value)
        case .nothing: break
        case .sum(let sum): member("sum", .double(sum))
        case .queue(let dropped):
            member("dropped", .int(Int64(dropped)))
        }
        output.append(UInt8(ascii: "}"))
        return String(decoding: output, as: UTF8.self)
    }

    static func decodeSlot(_ text: String) -> Queue.Slot? {
        guard let value = try? JSONParser.parse(text), let policyValue = value["policy"],
            let policy = CoalescingPolicy(wire: policyValue),
            let count = value["count"]?.intValue, let first = value["first"]?.doubleValue,
            let last = value["last"]?.doubleValue
        else { return nil }
        let held: Queue.Held
        switch policy {
        case .latest, .first, .merge, .netChange:
            guard let payload = value["payload"] else { return nil }
            held = .payload(EventPayload(payload))
        case .count: held = .nothing
        case .sum: held = .sum(value["sum"]?.doubleValue ?? 0)
        case .queue:
            held = .queue(dropped: Int(value["dropped"]?.intValue ?? 0))
        }
        return Queue.Slot(policy: policy, count: Int(count), first: first, last: last, held: held)
    }

    /// An event as the store keeps it; `nil` when the text is not one.
    static func decodeEvent(_ text: String) -> Queue.Event? {
        guard let value = try? JSONParser.parse(text), let kindName = value["kind"]?.stringValue,
            let kind = try? EventKind(stored: kindName), let count = value["count"]?.intValue,
            let first = value["firstPosted"]?.doubleValue, let last = value["lastPosted"]?.doubleValue
        else { return nil }
        return Queue.Event(
            kind: kind,
            payload: value["payload"].map(EventPayload.init),
            count: Int(count),
            firstPosted: first,
            lastPosted: last,
            dropped: value["dropped"]?.intValue.map { Int($0) }
        )
    }

    /// An event as the app's stream carries it (its `seq` added when sent).
    static func event(_ event: Queue.Event) -> JSONValue {
        var object: JSONObject = [
            "kind": .string(event.kind.value), "count": .int(Int64(event.count)),
            "firstPosted": .double(event.firstPosted), "lastPosted": .double(event.lastPosted),
        ]
        if let payload = event.payload { object["payload"] = payload.value }
        if let dropped = event.dropped { object["dropped"] = .int(Int64(dropped)) }
        return .object(object)
    }
}
