/// Why a journal watch cannot be used, in words an operator can act on.
public struct WatchProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The watch's name as given (possibly not a valid one).
    public var watch: String
    public var reason: String

    public init(watch: String, reason: String) {
        self.watch = watch
        self.reason = reason
    }

    public var description: String { "journal watch '\(self.watch)': \(self.reason)" }
}

/// A journal watch's name: what the operator and coalescectl call it, and what its read position is stored under.
public struct WatchName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let maximumLength = 64
    public let value: String

    /// - Throws: ``WatchProblem`` unless `value` is 1 to 64 ASCII letters, digits, `-`, `_`, `.` or `@`,
    ///   starting with a letter or digit.
    public init(_ value: String) throws(WatchProblem) {
        let bytes = Array(value.utf8)
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard let first = bytes.first, isAlphanumeric(first), bytes.count <= Self.maximumLength,
            bytes.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") })
        else {
            throw WatchProblem(
                watch: value,
                reason: "a watch's name is 1 to \(Self.maximumLength) letters, digits, '-', '_', '.' or '@', starting with a letter or digit"
            )
        }
        self.value = value
    }

    public var description: String { self.value }
    public static func < (lhs: WatchName, rhs: WatchName) -> Bool { lhs.value < rhs.value }
}

/// Which journal entries a watch takes, before its message pattern: as sd-journal combines matches, the values of
/// one field are alternatives and different fields all apply. Units and user units are one source: an entry of any
/// of them.
public struct JournalSelection: Sendable, Hashable {
    /// `_SYSTEMD_UNIT` values.
    public var units: [String] = []
    /// `_SYSTEMD_USER_UNIT` values.
    public var userUnits: [String] = []
    /// `SYSLOG_IDENTIFIER` values.
    public var identifiers: [String] = []
    /// The least urgent priority taken (0 emerg … 7 debug): `err` (3) takes emerg, alert, crit and err.
    public var priority: Int?
    /// Other `FIELD=value` matches, by field.
    public var fields: [String: [String]] = [:]

    public init() {}

    /// Whether nothing restricts it: every entry is taken.
    public var isEverything: Bool {
        self.units.isEmpty && self.userUnits.isEmpty && self.identifiers.isEmpty && self.priority == nil && self.fields.isEmpty
    }

    /// The fields an entry must be read for to test it.
    public var fieldNames: [String] {
        var names: [String] = []
        if !self.units.isEmpty { names.append("_SYSTEMD_UNIT") }
        if !self.userUnits.isEmpty { names.append("_SYSTEMD_USER_UNIT") }
        if !self.identifiers.isEmpty { names.append("SYSLOG_IDENTIFIER") }
        if self.priority != nil { names.append("PRIORITY") }
        names += self.fields.keys.sorted()
        return names
    }

    /// The selection as sd-journal match groups: each group a list of `FIELD=value` terms (same field ORed,
    /// different fields ANDed), the groups ORed. Units and user units make a group each, the rest in both.
    public var matchGroups: [[String]] {
        var common: [String] = self.identifiers.map { "SYSLOG_IDENTIFIER=\($0)" }
        if let priority = self.priority { common += (0...priority).map { "PRIORITY=\($0)" } }
        for field in self.fields.keys.sorted() { common += self.fields[field]!.map { "\(field)=\($0)" } }
        let sources = [self.units.map { "_SYSTEMD_UNIT=\($0)" }, self.userUnits.map { "_SYSTEMD_USER_UNIT=\($0)" }].filter { !$0.isEmpty }
        guard !sources.isEmpty else { return [common] }
        return sources.map { $0 + common }
    }

    /// Whether an entry whose fields `field` reads is taken.
    public func admits(_ field: (String) -> String?) -> Bool {
        if !self.units.isEmpty || !self.userUnits.isEmpty {
            let unit = self.units.isEmpty ? nil : field("_SYSTEMD_UNIT")
            let userUnit = self.userUnits.isEmpty ? nil : field("_SYSTEMD_USER_UNIT")
            guard unit.map(self.units.contains) == true || userUnit.map(self.userUnits.contains) == true else { return false }
        }
        if !self.identifiers.isEmpty {
            guard let identifier = field("SYSLOG_IDENTIFIER"), self.identifiers.contains(identifier) else { return false }
        }
        if let ceiling = self.priority {
            guard let text = field("PRIORITY"), let priority = Int(text), (0...ceiling).contains(priority) else { return false }
        }
        for (name, values) in self.fields {
            guard let value = field(name), values.contains(value) else { return false }
        }
        return true
    }

    /// syslog's priority names, as journalctl's `--priority` takes them.
    public static let priorityNames = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]

    /// A priority given as a name or a number 0–7.
    public static func priority(parsing text: String) -> Int? {
        if let number = Int(text), (0...7).contains(number) { return number }
        return Self.priorityNames.firstIndex(of: text.lowercased())
    }
}

/// A test of an entry's MESSAGE, applied after the journal's own matches.
public enum MessagePattern: Sendable, Hashable, CustomStringConvertible {
    /// The message contains this text.
    case contains(String)
    /// The message matches this regular expression, in PCRE2's syntax as `journalctl --grep` takes it (at most
    /// ``maximumLength`` bytes; the daemon compiles it, and bounds what testing a message may cost).
    case regex(String)

    public static let maximumLength = 256

    public var text: String {
        switch self {
        case .contains(let text), .regex(let text): text
        }
    }

    public var description: String {
        switch self {
        case .contains(let text): "contains '\(text)'"
        case .regex(let text): "matches /\(text)/"
        }
    }
}

/// Where a watch's events go.
public enum WatchTarget: Sendable, Hashable, CustomStringConvertible {
    case app(AppName)
    /// Every subscriber of the topic that lets the watch's owner post.
    case topic(EventKind)

    /// Reads `org.example.app` or `topic:NAME`.
    public init(parsing text: String) throws(WatchProblem.Reason) {
        if text.hasPrefix("topic:") {
            do {
                self = .topic(try EventKind(String(text.dropFirst("topic:".count))))
            } catch {
                throw .init("the target '\(text)' is not a topic: \(error.reason)")
            }
            return
        }
        do {
            self = .app(try AppName(text))
        } catch {
            throw .init("the target '\(text)' is neither an app nor topic:NAME: \(error.reason)")
        }
    }

    public var description: String {
        switch self {
        case .app(let app): app.value
        case .topic(let topic): "topic:\(topic.value)"
        }
    }
}

extension WatchProblem {
    /// A reason without the watch's name, for the parts of a watch read before it is known.
    public struct Reason: Error, Sendable {
        public var text: String
        public init(_ text: String) { self.text = text }
    }
}

/// Where a new watch begins reading.
public enum WatchStart: Sendable, Hashable {
    /// After the newest entry there is now.
    case tail
    /// At the oldest entry the journal keeps.
    case head
    /// After the entry this cursor names.
    case cursor(String)
    /// At the first entry written at or after this wall-clock time (µs since the epoch).
    case time(realtimeMicroseconds: UInt64)
}

/// One journal watch: which entries it takes, and what it posts for them, to whom (DESIGN.md §5).
public struct JournalWatch: Sendable, Hashable {
    /// The fields a payload carries unless the watch names others: the line, its priority, unit and process, its
    /// time and its cursor.
    public static let defaultFields = ["MESSAGE", "PRIORITY", "_SYSTEMD_UNIT", "_PID", "__REALTIME_TIMESTAMP", "__CURSOR"]
    /// The most fields a payload carries.
    public static let maximumFields = 16
    /// The most bytes of one field's value a payload carries; longer values are cut there (at a character).
    public static let maximumFieldBytes = 2048
    /// The most values a watch's matches may list in all.
    public static let maximumMatchValues = 64

    public var name: WatchName
    public var selection: JournalSelection
    public var pattern: MessagePattern?
    public var kind: EventKind
    public var target: WatchTarget
    public var policy: CoalescingPolicy
    /// The entry's fields its events carry, in order.
    public var fields: [String]

    public init(
        name: WatchName,
        selection: JournalSelection,
        pattern: MessagePattern? = nil,
        kind: EventKind,
        target: WatchTarget,
        policy: CoalescingPolicy = .latest,
        fields: [String] = JournalWatch.defaultFields
    ) throws(WatchProblem) {
        self.name = name
        self.selection = selection
        self.pattern = pattern
        self.kind = kind
        self.target = target
        self.policy = policy
        self.fields = fields
        try self.validate()
    }

    /// Checks the bounds and forms a watch must keep.
    public func validate() throws(WatchProblem) {
        func fail(_ reason: String) -> WatchProblem { WatchProblem(watch: self.name.value, reason: reason) }
        let values = self.selection.units.count + self.selection.userUnits.count + self.selection.identifiers.count
            + self.selection.fields.values.reduce(0) { $0 + $1.count }
        guard values <= Self.maximumMatchValues else {
            throw fail("\(values) match values; a watch takes at most \(Self.maximumMatchValues)")
        }
        for (field, list) in self.selection.fields {
            if let reason = Self.fieldNameProblem(field) { throw fail("match on '\(field)': \(reason)") }
            for value in list where value.utf8.contains(0) || value.utf8.count > Self.maximumFieldBytes {
                throw fail("the value matched for \(field) holds a NUL or is longer than \(Self.maximumFieldBytes) bytes")
            }
        }
        for value in self.selection.units + self.selection.userUnits + self.selection.identifiers
        where value.isEmpty || ControlCharacters.first(in: value) != nil || value.utf8.count > 256 {
            throw fail("a unit or identifier must be 1 to 256 bytes without control characters: '\(value)'")
        }
        if let ceiling = self.selection.priority, !(0...7).contains(ceiling) {
            throw fail("priority \(ceiling) is not 0 (emerg) to 7 (debug)")
        }
        if let pattern = self.pattern {
            guard !pattern.text.isEmpty, pattern.text.utf8.count <= MessagePattern.maximumLength, !pattern.text.utf8.contains(0) else {
                throw fail("a message pattern is 1 to \(MessagePattern.maximumLength) bytes without NUL; this one is \(pattern.text.utf8.count)")
            }
        }
        guard !self.fields.isEmpty, self.fields.count <= Self.maximumFields else {
            throw fail("a watch's events carry 1 to \(Self.maximumFields) fields; \(self.fields.count) were named")
        }
        // Journal fields are text: of a watch's payload, only its entries can be added up.
        if case .sum(let field) = self.policy, field != "entries" {
            throw fail("sum adds up a number, and journal fields are text: sum:entries adds up the entries the posts stand for")
        }
        if Set(self.fields).count != self.fields.count { throw fail("a field is named twice among the fields its events carry") }
        for field in self.fields where !Self.addressFields.contains(field) {
            if let reason = Self.fieldNameProblem(field) { throw fail("field '\(field)': \(reason)") }
        }
    }

    /// The fields of an entry's place in the journal rather than of its data, which an event can carry too.
    public static let addressFields: Set<String> = ["__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP"]

    /// Why `name` is not a journal field name (upper-case letters, digits and `_`, not starting with a digit, at
    /// most 64 bytes), or `nil` when it is one.
    public static func fieldNameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { return "a journal field name is 1 to 64 characters" }
        guard bytes.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }),
            !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0])
        else { return "a journal field name is upper-case letters, digits and '_', not starting with a digit" }
        return nil
    }

    /// Every field an entry must be read for: to test it, and to fill the payload.
    public var neededFields: [String] {
        var names = self.selection.fieldNames
        if self.pattern != nil, !names.contains("MESSAGE") { names.append("MESSAGE") }
        for field in self.fields where !names.contains(field) { names.append(field) }
        return names
    }
}
