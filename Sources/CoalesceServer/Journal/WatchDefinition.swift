import CoalesceCore
import Varlink

/// A journal watch with who it posts as: the configuration's post as root; one added at run time as the
/// administrator who added it, so that the apps' posters rules decide who receives it as they decide any post.
struct ConfiguredWatch: Sendable, Hashable {
    var watch: JournalWatch
    /// The poster's uid.
    var owner: UInt32
    /// Where it came from: the configuration, or an administrator at run time (stored).
    var origin: Origin

    enum Origin: String, Sendable, Hashable {
        case configuration
        case runtime
    }

    var name: WatchName { self.watch.name }
}

/// A watch as the System interface and the store write it (the `WatchDefinition` type of io.coalesced.System):
/// each member optional but the name, kind and target.
enum WatchDefinition {
    /// Reads a definition.
    /// - Throws: ``WatchProblem`` naming the member that is wrong and why.
    static func watch(from object: JSONObject) throws(WatchProblem) -> JournalWatch {
        let nameText = object["name"]?.stringValue ?? ""
        let name = try WatchName(nameText)
        func fail(_ reason: String) -> WatchProblem { WatchProblem(watch: nameText, reason: reason) }
        func strings(_ member: String) throws(WatchProblem) -> [String] {
            guard let value = object[member], value != .null else { return [] }
            guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw fail("\(member) must be a list of strings")
            }
            return list.compactMap(\.stringValue)
        }
        func string(_ member: String) throws(WatchProblem) -> String? {
            guard let value = object[member], value != .null else { return nil }
            guard let text = value.stringValue else { throw fail("\(member) must be a string") }
            return text
        }
        var selection = JournalSelection()
        selection.units = try strings("units")
        selection.userUnits = try strings("userUnits")
        selection.identifiers = try strings("identifiers")
        if let priority = try string("priority") {
            guard let level = JournalSelection.priority(parsing: priority) else {
                throw fail("priority '\(priority)' is not one of \(JournalSelection.priorityNames.joined(separator: ", ")) or 0-7")
            }
            selection.priority = level
        }
        for match in try strings("matches") {
            guard let equals = match.firstIndex(of: "="), equals != match.startIndex else {
                throw fail("the match '\(match)' is not FIELD=value")
            }
            let field = String(match[..<equals])
            if let reason = JournalWatch.fieldNameProblem(field) { throw fail("the match '\(match)': \(reason)") }
            selection.fields[field, default: []].append(String(match[match.index(after: equals)...]))
        }
        let grep = try string("grep")
        let contains = try string("contains")
        if grep != nil, contains != nil { throw fail("grep and contains are alternatives: give one") }
        let pattern: MessagePattern? = grep.map { .regex($0) } ?? contains.map { .contains($0) }
        guard let kindText = try string("kind") else { throw fail("kind is missing: the kind its events are posted as") }
        let kind: EventKind
        do { kind = try EventKind(kindText) } catch { throw fail("kind: \(error.reason)") }
        guard let targetText = try string("to") else { throw fail("to is missing: an app, or topic:NAME") }
        let target: WatchTarget
        do { target = try WatchTarget(parsing: targetText) } catch { throw fail(error.text) }
        var policy = CoalescingPolicy.latest
        if let text = try string("policy") {
            do { policy = try CoalescingPolicy(parsing: text) } catch { throw fail("policy: \(error.description)") }
        }
        let fields = try strings("fields")
        let watch = try JournalWatch(
            name: name, selection: selection, pattern: pattern, kind: kind, target: target, policy: policy,
            fields: fields.isEmpty ? JournalWatch.defaultFields : fields
        )
        if let pattern {
            do { _ = try MessageMatcher(pattern) } catch { throw fail(error.text) }
        }
        return watch
    }

    /// Where a watch begins, as AddWatch takes it: tail, head, cursor=CURSOR or since=SECONDS; `nil` for text that
    /// is none of them.
    static func start(parsing text: String) -> WatchStart? {
        if text == "tail" { return .tail }
        if text == "head" { return .head }
        // A cursor is a name sd-journal is given as a C string: no control character, NUL least of all.
        if text.hasPrefix("cursor="), ControlCharacters.first(in: text) == nil, JournalCursor(String(text.dropFirst("cursor=".count))) != nil {
            return .cursor(String(text.dropFirst("cursor=".count)))
        }
        if text.hasPrefix("since="), let microseconds = Self.microseconds(text.dropFirst("since=".count)) {
            return .time(realtimeMicroseconds: microseconds)
        }
        return nil
    }

    /// The seconds of since=SECONDS in microseconds, from 0 up to the year 5138 (past that a wall-clock time in
    /// microseconds leaves 64 bits): a decimal of up to six places read exactly, as ``text(of:)`` writes them (a
    /// `Double` may read what it wrote back a microsecond less); any other number as `Double` reads it.
    private static func microseconds(_ text: Substring) -> UInt64? {
        let limit: UInt64 = 100_000_000_000 * 1_000_000
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.allSatisfy({ $0.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } }),
            let seconds = UInt64(parts[0]), parts.count == 1 || (1...6).contains(parts[1].utf8.count)
        {
            guard seconds < limit / 1_000_000 else { return nil }
            let places = parts.count == 2 ? parts[1] + String(repeating: "0", count: 6 - parts[1].utf8.count) : "0"
            return seconds * 1_000_000 + UInt64(places)!  // digits only, at most six
        }
        guard let seconds = Double(text), seconds >= 0, seconds < 1e11 else { return nil }
        let microseconds = UInt64(seconds * 1_000_000)
        return microseconds < limit ? microseconds : nil
    }

    /// A start as ``start(parsing:)`` reads it back.
    static func text(of start: WatchStart) -> String {
        switch start {
        case .tail: "tail"
        case .head: "head"
        case .cursor(let cursor): "cursor=\(cursor)"
        case .time(let microseconds):
            // Exact, in decimal: 1764000000.5, not a Double's 1.7640000005e9.
            microseconds % 1_000_000 == 0
                ? "since=\(microseconds / 1_000_000)"
                : "since=\(microseconds / 1_000_000)." + String(String(1_000_000 + microseconds % 1_000_000).dropFirst().reversed().drop { $0 == "0" }.reversed())
        }
    }

    /// The definition of a watch, as ``watch(from:)`` reads it back.
    static func object(_ watch: JournalWatch) -> JSONObject {
        var object: JSONObject = ["name": .string(watch.name.value)]
        func list(_ member: String, _ values: [String]) {
            if !values.isEmpty { object[member] = .array(values.map { .string($0) }) }
        }
        list("units", watch.selection.units)
        list("userUnits", watch.selection.userUnits)
        list("identifiers", watch.selection.identifiers)
        if let priority = watch.selection.priority { object["priority"] = .string(JournalSelection.priorityNames[priority]) }
        list("matches", watch.selection.fields.keys.sorted().flatMap { field in watch.selection.fields[field]!.map { "\(field)=\($0)" } })
        switch watch.pattern {
        case .regex(let text)?: object["grep"] = .string(text)
        case .contains(let text)?: object["contains"] = .string(text)
        case nil: break
        }
        object["kind"] = .string(watch.kind.value)
        object["to"] = .string(watch.target.description)
        object["policy"] = .string(watch.policy.text)
        object["fields"] = .array(watch.fields.map { .string($0) })
        return object
    }
}
