import ArgumentParser
import CoalesceWire
import Systemd
import Varlink

@main
struct Coalescectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalescectl",
        abstract: "Query and control the coalesced daemon.",
        discussion: """
            Exit status: 0 success; 1 the daemon answered with an error; 64 bad usage; \
            69 the daemon cannot be reached; 76 the daemon's answer was not Varlink, or not a reply coalescectl reads.
            """,
        version: CoalescedVersion.string,
        subcommands: [
            Status.self, Apps.self, App.self, Explain.self, Scenes.self, Launch.self, Open.self, Refreshes.self, Activate.self, Deactivate.self, Interrupt.self,
            Terminate.self, Purge.self, Monitor.self, Post.self, Queue.self, Notify.self, Watch.self, Introspect.self,
            Call.self,
        ]
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
}

/// How replies are printed, as journalctl's and busctl's `-o` choose.
enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    /// For people: tables and label-value rows.
    case table
    /// The reply as JSON, one line each.
    case json
    /// The reply as indented JSON.
    case jsonPretty = "json-pretty"
}

/// Options every subcommand takes, anywhere on the command line. Each subcommand declares them as an
/// `@OptionGroup` too, so that its `--help` lists them; the argument parser hands it the values the root parsed.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("socket"),
        help: ArgumentHelp("Talk to the daemon on this socket.", valueName: "path"),
        completion: .file()
    )
    var socket: String?

    @Flag(name: .customLong("user"), help: "Talk to the user instance ($XDG_RUNTIME_DIR/coalesced/io.coalesced).")
    var user = false

    @Flag(name: .customLong("system"), help: "Talk to the system instance (/run/coalesced/io.coalesced).")
    var system = false

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp(
            "Print replies as a table for people, as JSON one line each, or as indented JSON (default: table).",
            valueName: "format"
        )
    )
    var output: OutputFormat?

    @Flag(name: .customLong("json"), help: "The same as -o json.")
    var jsonFlag = false

    @Flag(name: .customLong("no-legend"), help: "Print tables without their header and the summary line after them.")
    var noLegend = false

    @Flag(name: .customLong("no-pager"), help: "Do not pipe output into a pager.")
    var noPager = false

    func validate() throws {
        if self.system && self.user { throw ValidationError("--system and --user exclude each other") }
        if self.jsonFlag, let output = self.output, output != .json {
            throw ValidationError("--json is -o json, which excludes -o \(output.rawValue)")
        }
        if self.socket == nil {
            // The same decision, and the same words, as coalesced's.
            do { _ = try self.instancePaths.socket } catch { throw ValidationError("\(error)") }
        }
    }

    var format: OutputFormat { self.output ?? (self.jsonFlag ? .json : .table) }

    /// Whether replies are printed as JSON, of either kind.
    var json: Bool { self.format != .table }

    var instance: DaemonInstance { DaemonInstance(system: self.system, user: self.user) }

    private var instancePaths: InstancePaths { InstancePaths(instance: self.instance) }

    var socketPath: String {
        // Validated above: only a user instance without XDG_RUNTIME_DIR has no socket, and it is refused.
        self.socket ?? (try? self.instancePaths.socket) ?? InstancePaths.systemSocket
    }

    /// A reply as `-o` says: one line, or indented.
    func jsonText(_ value: JSONValue) -> String {
        self.format == .jsonPretty ? value.prettyText() : value.jsonText
    }

    /// Lets the command's output go through the pager, as systemctl does for what can be long.
    func paged() {
        if !self.noPager { Pager.arm() }
    }

    /// Calls one method and returns its reply, or exits with the failure's message and status. With `-o json` or
    /// `-o json-pretty` the reply is printed here and `nil` returned: the caller has nothing left to show.
    func call(_ method: String, _ parameters: JSONObject = [:]) -> JSONObject? {
        let client = self.connect()
        client.setReceiveTimeout(.seconds(30))
        let reply = CtlOutput.perform { try client.call(method, parameters) }
        if self.json {
            CtlOutput.print(self.jsonText(.object(reply)))
            return nil
        }
        return reply
    }

    /// Calls one method for what the command says along the way: its reply, or `nil` on any failure (the command's
    /// own call reports that). Never printed, whatever `-o` says.
    func quietCall(_ method: String, _ parameters: JSONObject = [:]) -> JSONObject? {
        guard let client = try? VarlinkClient(path: self.socketPath) else { return nil }
        client.setReceiveTimeout(.seconds(30))
        return try? client.call(method, parameters)
    }

    /// Connects, or exits with a line that says what to check for the socket in use.
    func connect() -> VarlinkClient {
        do {
            return try VarlinkClient(path: self.socketPath)
        } catch {
            CtlOutput.fail("\(error); \(self.unreachableHint)", status: CtlExit.unavailable)
        }
    }

    /// What to check when nothing answers: the units of the instance whose socket this is, or, for a socket named
    /// with --socket, that no daemon serves that path.
    var unreachableHint: String {
        if let socket {
            return "is coalesced running with --socket \(socket)? No daemon serves that path."
        }
        switch self.instance {
        case .system:
            return "is coalesced running? Check 'systemctl status coalesced.socket coalesced.service', "
                + "or pass --user or --socket PATH."
        case .user:
            return "is coalesced running? Check 'systemctl --user status coalesced.socket coalesced.service', "
                + "or pass --system or --socket PATH."
        }
    }
}

enum CtlExit {
    static let varlinkError: Int32 = 1
    static let unavailable: Int32 = 69
    static let protocolError: Int32 = 76
}

enum CtlOutput {
    static func print(_ text: String) {
        Pager.startIfArmed()
        StandardOutput.write(text + "\n")
    }

    /// A line for the person at the terminal, on stderr, so that stdout stays the data.
    static func note(_ text: String) {
        StderrSink.writeLine(text)
    }

    static func fail(_ message: String, status: Int32) -> Never {
        StderrSink.writeLine("coalescectl: \(message)")
        CurrentProcess.exit(status)
    }

    /// Runs a client call, turning each failure into its message and exit status.
    static func perform<T>(_ body: () throws -> T) -> T {
        do {
            return try body()
        } catch let error as VarlinkError where error == .permissionDenied {
            self.fail(
                "the daemon answered with an error: \(error): this is for root, the daemon's own user and members of the "
                    + "group set by AdminGroup= in coalesced.conf",
                status: CtlExit.varlinkError
            )
        } catch let error as VarlinkError {
            self.fail("the daemon answered with an error: \(error)", status: CtlExit.varlinkError)
        } catch let error as VarlinkClientError {
            switch error {
            case .protocolViolation: self.fail("\(error)", status: CtlExit.protocolError)
            default: self.fail("\(error)", status: CtlExit.unavailable)
            }
        } catch {
            self.fail("\(error)", status: CtlExit.varlinkError)
        }
    }

    /// A table as `systemctl list-units` prints it: the header row and the rows, columns left-aligned and padded,
    /// then a blank line and `summary`; with `--no-legend`, the rows alone, for scripts.
    static func table(header: [String], _ rows: [[String]], summary: String, legend: Bool) {
        guard legend else {
            if !rows.isEmpty { self.print(self.columns([header] + rows).split(separator: "\n").dropFirst().joined(separator: "\n")) }
            return
        }
        self.print(self.columns([header] + rows))
        self.print("\n" + summary)
    }

    /// A table with a header row, columns left-aligned and padded, as `systemctl list-units` lays them out.
    static func columns(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: " ")
        }.joined(separator: "\n")
    }

    /// A span of seconds as a setting writes it: `10s`, `500ms`.
    static func seconds(_ value: Double) -> String {
        let milliseconds = Int((value * 1000).rounded())
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }

    /// A wall-clock time as systemd prints it: `2026-11-23 11:32:05 UTC`.
    static func timestamp(_ seconds: Double) -> String {
        CalendarTime.localText(seconds, format: "%Y-%m-%d %H:%M:%S %Z")
    }

    /// Label-value rows with the labels right-aligned, as `systemctl status` lays them out.
    static func table(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { label, value in
            String(repeating: " ", count: width - label.count) + label + ": " + value
        }.joined(separator: "\n")
    }
}

/// The pager, as systemctl runs one: for output that can be long, only when stdout is a terminal, unless
/// `--no-pager`. `$COALESCECTL_PAGER`, else `$PAGER`, run through `sh -c`; empty or `cat` means none. Without
/// either, `less`, else `more`. `less` gets `LESS=FRSXMK` (quit when it fits on one screen, keep colours, chop long
/// lines, quit on Ctrl-C), or `$COALESCECTL_LESS` when set, as systemd uses `$SYSTEMD_LESS`.
enum Pager {
    // Touched only from the main thread: the command's run.
    nonisolated(unsafe) private static var armed = false

    static func arm() { Self.armed = true }

    /// Starts the pager before the first line is written, so that a command that fails prints its error on the
    /// terminal rather than in a pager.
    static func startIfArmed() {
        guard Self.armed else { return }
        Self.armed = false
        guard StandardOutput.isTerminal else { return }
        let chosen = ProcessEnvironment.value("COALESCECTL_PAGER") ?? ProcessEnvironment.value("PAGER")
        let candidates: [[String]]
        switch chosen?.trimmingSpaces {
        case ""?, "cat"?: return
        case let command?: candidates = [["/bin/sh", "-c", command]]
        case nil: candidates = [["less"], ["more"]]
        }
        ProcessEnvironment.set("LESS", to: ProcessEnvironment.value("COALESCECTL_LESS") ?? "FRSXMK")
        ProcessEnvironment.set("LESSCHARSET", to: "utf-8", replacing: false)
        // When no pager can be started, the output goes to the terminal as it is.
        OutputPager.start(candidates)
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(self.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
