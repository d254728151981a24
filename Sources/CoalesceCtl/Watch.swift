import ArgumentParser
import Varlink

/// `coalescectl watch …`: the journal watches, which post journal entries to apps as events (io.coalesced.System).
struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, list and remove journal watches, which post journal entries to apps as events (AddWatch, "
            + "ListWatches, RemoveWatch).",
        subcommands: [WatchAdd.self, WatchList.self, WatchRemove.self]
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
}

struct WatchAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a journal watch, kept across restarts of the daemon (AddWatch).",
        discussion: """
            An entry is taken when it comes from one of the --unit or --user-unit units (when any is given) and \
            holds each of the other options given: one of the --identifier values, a priority as urgent as \
            --priority, each --match field with one of its values, and a MESSAGE matching --grep or containing \
            --contains. Each taken entry is posted as the event --kind to --to, as you: the app's posters rules \
            decide whether you may post to it. Example: coalescectl watch add nginx-errors --unit nginx.service \
            --priority err --kind server.error --to org.example.monitor --policy count
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The watch's name: 1 to 64 letters, digits, '-', '_', '.' or '@', starting with a letter or digit.")
    var name: String

    @Option(
        name: .customLong("unit"),
        help: ArgumentHelp("Entries of this system unit (_SYSTEMD_UNIT), such as nginx.service; repeatable.", valueName: "unit")
    )
    var units: [String] = []

    @Option(
        name: .customLong("user-unit"),
        help: ArgumentHelp("Entries of this user unit (_SYSTEMD_USER_UNIT); repeatable.", valueName: "unit")
    )
    var userUnits: [String] = []

    @Option(
        name: .customLong("identifier"),
        help: ArgumentHelp("Entries with this SYSLOG_IDENTIFIER; repeatable.", valueName: "identifier")
    )
    var identifiers: [String] = []

    @Option(help: ArgumentHelp(
        "Entries of this priority and more urgent ones: emerg, alert, crit, err, warning, notice, info, debug or 0-7.",
        valueName: "priority"
    ))
    var priority: String?

    @Option(
        name: .customLong("match"),
        help: ArgumentHelp(
            "Entries whose FIELD has this value; repeatable (one field's values are alternatives).",
            valueName: "FIELD=value"
        )
    )
    var matches: [String] = []

    @Option(
        help: ArgumentHelp("Entries whose MESSAGE matches this regular expression (PCRE2, as journalctl --grep; at most 256 bytes).", valueName: "regex")
    )
    var grep: String?

    @Option(help: ArgumentHelp("Entries whose MESSAGE contains this text.", valueName: "text"))
    var contains: String?

    @Option(help: "The kind the events are posted as, such as server.error.")
    var kind: String

    @Option(
        help: ArgumentHelp("The app the events go to, or topic:NAME for every app subscribed to NAME.", valueName: "target"),
        completion: AppNameCompletion.kind
    )
    var to: String

    @Option(help: ArgumentHelp(
        "The events' policy: latest (the daemon's default), first, count, sum:FIELD, merge, netChange or queue:BOUND.",
        valueName: "policy"
    ))
    var policy: String?

    @Option(
        name: .customLong("field"),
        help: ArgumentHelp(
            "An entry's field the events carry; repeatable. Without any: MESSAGE, PRIORITY, _SYSTEMD_UNIT, _PID, "
                + "__REALTIME_TIMESTAMP and __CURSOR.",
            valueName: "field"
        )
    )
    var fields: [String] = []

    @Option(help: ArgumentHelp(
        "Where reading starts: tail (entries written from now on; the daemon's default), head (every entry the "
            + "journal keeps), cursor=CURSOR (after that entry) or since=SECONDS (since that time, in seconds since "
            + "the epoch).",
        valueName: "start"
    ))
    var start: String?

    func validate() throws {
        if self.grep != nil && self.contains != nil {
            throw ValidationError("--grep and --contains exclude each other: give one")
        }
    }

    func run() throws {
        var watch: JSONObject = ["name": .string(self.name), "kind": .string(self.kind), "to": .string(self.to)]
        func list(_ member: String, _ values: [String]) {
            if !values.isEmpty { watch[member] = .array(values.map { .string($0) }) }
        }
        list("units", self.units)
        list("userUnits", self.userUnits)
        list("identifiers", self.identifiers)
        list("matches", self.matches)
        list("fields", self.fields)
        if let priority { watch["priority"] = .string(priority) }
        if let grep { watch["grep"] = .string(grep) }
        if let contains { watch["contains"] = .string(contains) }
        if let policy { watch["policy"] = .string(policy) }
        var parameters: JSONObject = ["watch": .object(watch)]
        if let start { parameters["start"] = .string(start) }
        guard self.global.call("io.coalesced.System.AddWatch", parameters) != nil else { return }
        CtlOutput.print("added")
    }
}

struct WatchList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the journal watches, the configuration's first, with what each matched and posted "
            + "(ListWatches)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.System.ListWatches") else { return }
        let watches = reply["watches"]?.arrayValue ?? []
        let rows = watches.map { watch -> [String] in
            func count(_ key: String) -> String { watch[key]?.intValue.map { String($0) } ?? "?" }
            return [
                watch["name"]?.stringValue ?? "?",
                watch["origin"]?.stringValue ?? "?",
                watch["to"]?.stringValue ?? "?",
                watch["kind"]?.stringValue ?? "?",
                watch["policy"]?.stringValue ?? "?",
                count("matched"),
                count("posts"),
                count("refused"),
                count("untested"),
                watch["lastMatched"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
            ]
        }
        CtlOutput.table(
            header: ["NAME", "ORIGIN", "TARGET", "KIND", "POLICY", "MATCHED", "POSTS", "REFUSED", "UNTESTED", "LAST"], rows,
            summary: "\(watches.count) \(watches.count == 1 ? "watch" : "watches") listed.",
            legend: !self.global.noLegend
        )
    }
}

struct WatchRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a journal watch added with 'watch add' (RemoveWatch); a configured one is removed by "
            + "editing coalesced.conf."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The watch's name.", completion: WatchNameCompletion.kind)
    var name: String

    func run() throws {
        guard self.global.call("io.coalesced.System.RemoveWatch", ["watch": .string(self.name)]) != nil else { return }
        CtlOutput.print("removed")
    }
}
