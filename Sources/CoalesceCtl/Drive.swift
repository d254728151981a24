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

    @ParentCommand var root: Coalescectl

    @Argument(help: "The app's name.")
    var name: String

    @Flag(help: "Launch into the background instead of the foreground.")
    var background = false

    func run() throws {
        // Without a launch unit nothing is started: say what the command now waits for, and how long.
        if let app = self.root.global.quietCall("io.coalesced.System.GetApp", ["app": .string(self.name)])?["app"],
            app["launchUnit"] == nil,
            let limits = self.root.global.quietCall("io.coalesced.System.Stats")?["stats"]?["limits"]
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
            self.root.global.call(
                "io.coalesced.System.Launch",
                ["app": .string(self.name), "destination": self.background ? "background" : "foreground"]
            )
        )
    }
}

struct Activate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a running app to the foreground (io.coalesced.System.Activate)."
    )

    @ParentCommand var root: Coalescectl

    @Argument(help: "The app's name.")
    var name: String

    func run() throws {
        report(self.root.global.call("io.coalesced.System.Activate", ["app": .string(self.name)]))
    }
}

struct Deactivate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an app to the background, like the home button (io.coalesced.System.Deactivate)."
    )

    @ParentCommand var root: Coalescectl

    @Argument(help: "The app's name (default: the foreground app).")
    var name: String?

    func run() throws {
        report(self.root.global.call("io.coalesced.System.Deactivate", ["app": self.name.map { .string($0) } ?? .null]))
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

    @ParentCommand var root: Coalescectl

    @Argument(help: "begin or end.")
    var phase: Phase

    @Argument(help: "The app's name (default: the foreground app).")
    var name: String?

    func run() throws {
        report(
            self.root.global.call(
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

    @ParentCommand var root: Coalescectl

    @Argument(help: "The app's name.")
    var name: String

    func run() throws {
        report(self.root.global.call("io.coalesced.System.Terminate", ["app": .string(self.name)]))
    }
}

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Kill suspended apps without a callback, as under memory pressure (io.coalesced.System.Purge)."
    )

    @ParentCommand var root: Coalescectl

    @Argument(help: "The app's name (default: the suspended apps with the most memory).")
    var name: String?

    // Unconditional: `--count -1` is a count to refuse with a reason, not a missing value followed by an option.
    @Option(parsing: .unconditional, help: "How many apps to purge when none is named.")
    var count: Int = 1

    func validate() throws {
        guard self.count >= 1 else { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        let reply = self.root.global.call(
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
        abstract: "Print every app's transitions as they happen, until interrupted (io.coalesced.System.Monitor)."
    )

    @ParentCommand var root: Coalescectl

    func run() throws {
        let global = self.root.global
        let client = global.connect()
        CtlOutput.perform {
            try client.callMore("io.coalesced.System.Monitor") { reply in
                guard let transition = reply["transition"] else {
                    // The first reply: the monitor is in place. Said on stderr, as busctl monitor does.
                    if !global.json { CtlOutput.note("Monitoring app transitions; press Ctrl-C to stop.") }
                    return
                }
                if global.json {
                    CtlOutput.print(JSONValue.object(["transition": transition]).jsonText)
                    return
                }
                let time = transition["time"]?.doubleValue.map(CtlOutput.timestamp) ?? "-"
                let app = transition["app"]?.stringValue ?? "?"
                let from = transition["from"]?.stringValue ?? "?"
                let to = transition["to"]?.stringValue ?? "?"
                let reason = transition["reason"]?.stringValue ?? "?"
                CtlOutput.print("\(time) \(app): \(from) → \(to) (\(reason))")
            }
        }
    }
}
