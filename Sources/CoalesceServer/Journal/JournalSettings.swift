public import CoalesceCore
import Varlink

/// `[Journal]` and the `[JournalWatch NAME]` sections: how the daemon reads the journal for its watches.
public struct JournalSettings: Sendable, Hashable {
    /// `[Journal] Follow=`: read the journal for watches at all.
    public var follows = true
    /// `[Journal] BatchIntervalSec=`: a watch posts to one app at most once per interval (a queue policy's watch
    /// `QueueBurst=` times); the entries that come faster are folded into one post when it ends.
    public var interval: Duration = .milliseconds(100)
    /// `[Journal] QueueBurst=`: a queue policy's watch posts each entry as its own event up to this many per
    /// interval.
    public var queueBurst = 100
    /// `[Journal] MaxWatches=`: how many watches there may be, configured and added at run time together.
    public var maxWatches = 256
    /// `[Journal] UserWatches=`: how many watches a user who is not an administrator may add at run time, each
    /// taking only that user's own entries (`_UID=`) and posting only to an app of theirs; 0: none.
    public var userWatches = 0
    /// The `[JournalWatch NAME]` sections, checked, in the order they first appeared.
    public var watches: [JournalWatch] = []

    public init() {}

    /// The watches' sections as read, before each is checked as a whole at the end of the read.
    var sections: [WatchSection] = []
}

/// One `[JournalWatch NAME]` section as read: its assignments in order, each with where it was.
struct WatchSection: Sendable, Hashable {
    var name: String
    var path: String
    var line: Int
    var assignments: [Assignment] = []

    struct Assignment: Sendable, Hashable {
        var key: String
        var value: String
        var path: String
        var line: Int
    }

    /// The keys a watch's section takes; the list ones add to what was given before, and an empty value empties
    /// them.
    static let listKeys = ["Unit": "units", "UserUnit": "userUnits", "Identifier": "identifiers", "Fields": "fields"]
    static let singleKeys = ["Priority": "priority", "Grep": "grep", "Contains": "contains", "Kind": "kind", "To": "to", "Policy": "policy"]
    static let keyList = (Array(listKeys.keys) + Array(singleKeys.keys) + ["Match"]).sorted().joined(separator: ", ")

    /// The watch the section defines, as the System interface would take it.
    /// - Throws: ``ConfigurationError`` at the section's header for what is wrong with the watch as a whole.
    func watch() throws(ConfigurationError) -> JournalWatch {
        var object: JSONObject = ["name": .string(self.name)]
        var lists: [String: [String]] = [:]
        var matches: [String] = []
        for assignment in self.assignments {
            if let member = Self.listKeys[assignment.key] {
                lists[member] = assignment.value.isEmpty ? [] : (lists[member] ?? []) + assignment.value.split { $0 == " " || $0 == "\t" }.map(String.init)
            } else if assignment.key == "Match" {
                matches = assignment.value.isEmpty ? [] : matches + [assignment.value]
            } else if let member = Self.singleKeys[assignment.key] {
                object[member] = assignment.value.isEmpty ? nil : .string(assignment.value)
            }
        }
        for (member, values) in lists where !values.isEmpty { object[member] = .array(values.map { .string($0) }) }
        if !matches.isEmpty { object["matches"] = .array(matches.map { .string($0) }) }
        // Named as this file names them, not as the interface's members.
        for (key, member) in [("Kind", "kind"), ("To", "to")] where object[member] == nil {
            let what = key == "Kind" ? "the kind its events are posted as" : "an app, or topic:NAME"
            throw ConfigurationError(path: self.path, line: self.line, reason: "[JournalWatch \(self.name)]: \(key)= is missing: \(what)")
        }
        do {
            return try WatchDefinition.watch(from: object)
        } catch {
            throw ConfigurationError(path: self.path, line: self.line, reason: "[JournalWatch \(self.name)]: \(error.reason)")
        }
    }
}

extension Configuration {
    /// Takes one assignment of a `[JournalWatch NAME]` section.
    mutating func assign(watch name: String, key: String, value: String, path: String, line: Int) throws(ConfigurationValueError) {
        guard WatchSection.listKeys[key] != nil || WatchSection.singleKeys[key] != nil || key == "Match" else {
            throw ConfigurationValueError(reason: "unknown key '\(visible(key))' in [JournalWatch \(name)]; known keys: \(WatchSection.keyList)")
        }
        guard let index = self.journal.sections.firstIndex(where: { $0.name == name }) else { return }
        self.journal.sections[index].assignments.append(.init(key: key, value: value, path: path, line: line))
    }

    /// Opens (or, in a later file, goes back to) a `[JournalWatch NAME]` section.
    mutating func openWatchSection(_ name: String, path: String, line: Int) {
        guard !self.journal.sections.contains(where: { $0.name == name }) else { return }
        self.journal.sections.append(WatchSection(name: name, path: path, line: line))
    }

    /// Checks every watch section as a whole, once all files are read.
    mutating func finishWatchSections() throws(ConfigurationError) {
        var watches: [JournalWatch] = []
        for section in self.journal.sections { watches.append(try section.watch()) }
        guard watches.count <= self.journal.maxWatches else {
            let section = self.journal.sections[self.journal.maxWatches]
            throw ConfigurationError(
                path: section.path, line: section.line,
                reason: "more than MaxWatches=\(self.journal.maxWatches) journal watches; raise [Journal] MaxWatches= or remove some"
            )
        }
        self.journal.watches = watches
    }
}

extension ConfigurationKey {
    static let journalKeys: [String: Setter] = [
        "Follow": { configuration, value throws(ConfigurationValueError) in
            configuration.journal.follows = value.isEmpty ? true : try parseBoolean(value)
        },
        "BatchIntervalSec": { configuration, value throws(ConfigurationValueError) in
            let interval = value.isEmpty ? JournalSettings().interval : try parseTimeSpan(value)
            guard interval >= .milliseconds(10), interval <= .seconds(60) else {
                throw ConfigurationValueError(reason: "must be from 10ms to 60s")
            }
            configuration.journal.interval = interval
        },
        "QueueBurst": { configuration, value throws(ConfigurationValueError) in
            configuration.journal.queueBurst = value.isEmpty ? JournalSettings().queueBurst : try parseInteger(value, in: 1...10_000)
        },
        "UserWatches": { configuration, value throws(ConfigurationValueError) in
            configuration.journal.userWatches = value.isEmpty ? JournalSettings().userWatches : try parseInteger(value, in: 0...64)
        },
        "MaxWatches": { configuration, value throws(ConfigurationValueError) in
            configuration.journal.maxWatches = value.isEmpty ? JournalSettings().maxWatches : try parseInteger(value, in: 1...4096)
        },
    ]
}
