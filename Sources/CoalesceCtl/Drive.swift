import ArgumentParser
import Varlink

// The System methods that drive apps. Each prints the app's state afterwards, or the reply with --json.

/// Prints `app: state` from a reply that carries an app.
private func report(_ reply: JSONObject?) {
    guard let app = reply?["app"] else { return }
    CtlOutput.print("\(app["name"]?.stringValue ?? "?"): \(app["state"]?.stringValue ?? "?")")
}

struct Launch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start an app (io.coalesced.System.Launch); returns once it has attached.",
        discussion: "An app with a launch unit is started through systemd; otherwise its process must attach on its own."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    @Flag(help: "Launch into the background instead of the foreground.")
    var background = false

    func run() throws {
        // Without a launch unit nothing is started: say what the command now waits for, and how long.
        if let app = self.global.quietCall("io.coalesced.System.GetApp", ["app": .string(self.name)])?["app"],
            app["launchUnit"] == nil,
            let limits = self.global.quietCall("io.coalesced.System.Stats")?["stats"]?["limits"]
        {
            if let timeout = limits["launchTimeoutSec"]?.doubleValue {
                CtlOutput.note(
                    "\(self.name) has no launch unit: waiting up to \(CtlOutput.seconds(timeout)) (LaunchTimeoutSec=) for its process to attach."
                )
            } else {
                CtlOutput.note(
                    "\(self.name) has no launch unit: waiting for its process to attach, without end (LaunchTimeoutSec=infinity); Ctrl-C stops waiting."
                )
            }
        }
        report(
            self.global.call(
                "io.coalesced.System.Launch",
                ["app": .string(self.name), "destination": self.background ? "background" : "foreground"]
            )
        )
    }
}

struct Activate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a running app to the foreground (io.coalesced.System.Activate).",
        discussion: """
            With --scene, asks the session that shows that window of the app to focus it, through its \
            coalesce-screen-agent: the scene, and the app with it, become active once the window system has focused it.
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    @Option(help: ArgumentHelp("Focus this scene of the app (an id 'coalescectl scenes' lists).", valueName: "id"))
    var scene: String?

    func run() throws {
        var parameters: JSONObject = ["app": .string(self.name)]
        if let scene = self.scene { parameters["scene"] = .string(scene) }
        let reply = self.global.call("io.coalesced.System.Activate", parameters)
        report(reply)
        if let scene = self.scene, reply != nil {
            CtlOutput.note("asked the session to focus scene \(scene) of \(self.name); 'coalescectl scenes \(self.name)' shows when it has")
        }
    }
}

struct Deactivate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an app to the background, like the home button (io.coalesced.System.Deactivate)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name (default: the foreground app).", completion: AppNameCompletion.kind)
    var name: String?

    func run() throws {
        report(self.global.call("io.coalesced.System.Deactivate", ["app": self.name.map { .string($0) } ?? .null]))
    }
}

struct Interrupt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Begin or end an interruption such as a call or an alert (io.coalesced.System.Interrupt)."
    )

    enum Phase: String, ExpressibleByArgument, CaseIterable {
        case begin
        case end
    }

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "begin or end.")
    var phase: Phase

    @Argument(help: "The app's name (default: the foreground app).", completion: AppNameCompletion.kind)
    var name: String?

    func run() throws {
        report(
            self.global.call(
                "io.coalesced.System.Interrupt",
                ["phase": .string(self.phase.rawValue), "app": self.name.map { .string($0) } ?? .null]
            )
        )
    }
}

struct Terminate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End an app: willTerminate, then SIGTERM, then SIGKILL (io.coalesced.System.Terminate)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        report(self.global.call("io.coalesced.System.Terminate", ["app": .string(self.name)]))
    }
}

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Kill suspended apps without a callback, as under memory pressure (io.coalesced.System.Purge)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name (default: the suspended apps with the most memory).", completion: AppNameCompletion.kind)
    var name: String?

    // Unconditional: `--count -1` is a count to refuse with a reason, not a missing value followed by an option.
    @Option(parsing: .unconditional, help: "How many apps to purge when none is named.")
    var count: Int = 1

    func validate() throws {
        guard self.count >= 1 else { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        let reply = self.global.call(
            "io.coalesced.System.Purge",
            ["app": self.name.map { .string($0) } ?? .null, "count": .int(Int64(self.count))]
        )
        for app in reply?["purged"]?.arrayValue ?? [] {
            CtlOutput.print("\(app.stringValue ?? "?"): purged")
        }
    }
}

struct Monitor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print what happens to apps as it happens, one line each, until interrupted (io.coalesced.System.Monitor).",
        discussion: """
            Without --traffic or --watch, every app's transitions. --traffic adds posts (sent at once or held), \
            deliveries on the apps' streams, acknowledgements, and attaches and detaches of the apps' processes. \
            --app and --kind keep only those apps' records and those kinds' posts and deliveries. With --json, each \
            record is printed as the daemon sent it, one JSON object a line.
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Option(name: .customLong("app"), help: ArgumentHelp("Only this app's records; repeat for more apps.", valueName: "name"))
    var apps: [String] = []

    @Option(name: .customLong("kind"), help: ArgumentHelp("Only posts and deliveries of this kind; repeat for more kinds.", valueName: "kind"))
    var kinds: [String] = []

    @Flag(help: "Watch traffic too: posts, deliveries, acknowledgements, attaches and detaches.")
    var traffic = false

    @Option(
        name: .customLong("watch"),
        help: ArgumentHelp(
            "What to watch: transitions, posts, deliveries, acknowledgements, attachments or traffic; repeat for more.",
            valueName: "records"
        )
    )
    var watch: [String] = []

    /// What the monitor asks for: `watch` as the daemon takes it, transitions added when --traffic alone is given.
    var watched: [String] {
        var watched = self.watch
        if self.traffic {
            if watched.isEmpty { watched.append("transitions") }
            watched.append("traffic")
        }
        return watched
    }

    func run() throws {
        let global = self.global
        let client = global.connect()
        var parameters: JSONObject = [:]
        let watched = self.watched
        if !watched.isEmpty { parameters["watch"] = .array(watched.map { .string($0) }) }
        if !self.apps.isEmpty { parameters["apps"] = .array(self.apps.map { .string($0) }) }
        if !self.kinds.isEmpty { parameters["kinds"] = .array(self.kinds.map { .string($0) }) }
        CtlOutput.perform {
            try client.callMore("io.coalesced.System.Monitor", parameters) { reply in
                guard case let (name, record)? = reply.first(where: { $0.value != .null }).map({ ($0.key, $0.value) }) else {
                    // The first reply: the monitor is in place. Said on stderr, as busctl monitor does.
                    if !global.json { CtlOutput.note("Monitoring \(Self.describe(watched)); press Ctrl-C to stop.") }
                    return
                }
                if global.json {
                    CtlOutput.print(JSONValue.object([name: record]).jsonText)
                } else {
                    CtlOutput.print(Self.line(name, record))
                }
            }
        }
    }

    /// What the monitor watches, in words.
    static func describe(_ watched: [String]) -> String {
        guard !watched.isEmpty else { return "app transitions" }
        var names: [String] = []
        for name in watched {
            let expanded = name == "traffic" ? ["posts", "deliveries", "acknowledgements", "attachments"] : [name]
            for name in expanded where !names.contains(name) { names.append(name) }
        }
        names = names.map { $0 == "transitions" ? "app transitions" : $0 }
        guard names.count > 1 else { return names[0] }
        return names.dropLast().joined(separator: ", ") + " and " + names.last!
    }

    /// One record as a line: its time, the app, and what happened.
    static func line(_ name: String, _ record: JSONValue) -> String {
        let time = record["time"]?.doubleValue.map(CtlOutput.timestamp) ?? "-"
        let app = record["app"]?.stringValue ?? "?"
        func text(_ member: String) -> String {
            switch record[member] {
            case .string(let value)?: value
            case .int(let value)?: String(value)
            default: "?"
            }
        }
        let what: String
        switch name {
        case "transition":
            // A scene's transition names the scene: `scene w1: background → foregroundInactive (scenes)`.
            let scene = record["scene"]?.stringValue.map { "scene \($0): " } ?? ""
            what = "\(scene)\(text("from")) → \(text("to")) (\(text("reason")))"
        case "post":
            let target = record["target"]?.stringValue
            let via = target == app || target == nil ? "" : " to \(target!)"
            let outcome: String
            if record["delivered"]?.boolValue == true {
                outcome = record["seq"].flatMap(\.intValue).map { "delivered as seq \($0)" } ?? "delivered"
            } else {
                outcome = "held"
            }
            let poster = record["watch"]?.stringValue.map { "watch \($0) (uid \(text("uid")))" } ?? "uid \(text("uid"))"
            what = "post \(text("kind")) from \(poster)\(via): \(outcome)"
        case "delivery":
            let count = record["count"]?.intValue ?? 1
            what = "delivery \(text("kind")) seq \(text("seq"))\(count == 1 ? "" : " (\(count) posts)")"
        case "acknowledgement": what = "acknowledged up to seq \(text("seq"))"
        case "attach": what = "attached pid \(text("pid"))"
        case "detach": what = "detached pid \(text("pid"))"
        default: what = "\(name) \(record.jsonText)"
        }
        return "\(time) \(app): \(what)"
    }
}
