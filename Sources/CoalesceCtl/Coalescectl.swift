import ArgumentParser
import CoalesceWire
import Varlink

#if canImport(Glibc)
import Glibc
#endif

@main
struct Coalescectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalescectl",
        abstract: "Query and control the coalesced daemon.",
        discussion: """
            Exit status: 0 success; 1 the daemon answered with an error; 64 bad usage; \
            69 the daemon cannot be reached; 76 the daemon's answer was not Varlink.
            """,
        version: CoalescedVersion.string,
        subcommands: [
            Status.self, Apps.self, App.self, Launch.self, Activate.self, Deactivate.self, Interrupt.self,
            Terminate.self, Purge.self, Monitor.self, Post.self, Queue.self, Introspect.self, Call.self,
        ]
    )

    @OptionGroup var global: GlobalOptions
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("socket"), help: ArgumentHelp("Talk to the daemon on this socket.", valueName: "path"))
    var socket: String?

    @Flag(name: .customLong("user"), help: "Talk to the user instance ($XDG_RUNTIME_DIR/coalesced/io.coalesced).")
    var user = false

    @Flag(name: .customLong("system"), help: "Talk to the system instance (/run/coalesced/io.coalesced).")
    var system = false

    @Flag(name: .customLong("json"), help: "Print replies as JSON, one line each.")
    var json = false

    @Flag(name: .customLong("no-legend"), help: "Print tables without their header and the summary line after them.")
    var noLegend = false

    func validate() throws {
        if self.system && self.user { throw ValidationError("--system and --user exclude each other") }
    }

    var socketPath: String {
        if let socket { return socket }
        return InstancePaths(instance: DaemonInstance(system: self.system, user: self.user)).socket
    }

    /// Calls one method and returns its reply, or exits with the failure's message and status. With `--json` the
    /// reply is printed here and `nil` returned: the caller has nothing left to show.
    func call(_ method: String, _ parameters: JSONObject = [:]) -> JSONObject? {
        let client = self.connect()
        client.setReceiveTimeout(.seconds(30))
        let reply = CtlOutput.perform { try client.call(method, parameters) }
        if self.json {
            CtlOutput.print(JSONValue.object(reply).jsonText)
            return nil
        }
        return reply
    }

    /// Calls one method for what the command says along the way: its reply, or `nil` on any failure (the command's
    /// own call reports that). Never printed, whatever `--json` says.
    func quietCall(_ method: String, _ parameters: JSONObject = [:]) -> JSONObject? {
        guard let client = try? VarlinkClient(path: self.socketPath) else { return nil }
        client.setReceiveTimeout(.seconds(30))
        return try? client.call(method, parameters)
    }

    /// Connects, or exits with a line that says what to check.
    func connect() -> VarlinkClient {
        do {
            return try VarlinkClient(path: self.socketPath)
        } catch {
            let check = self.socketPath.hasPrefix("/run/coalesced/")
                ? "systemctl status coalesced.socket" : "systemctl --user status coalesced.socket"
            CtlOutput.fail(
                "\(error); is coalesced running? Check '\(check)', or pass --socket PATH.",
                status: CtlExit.unavailable
            )
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
        let line = text + "\n"
        _ = line.withCString { write(1, $0, strlen($0)) }
    }

    /// A line for the person at the terminal, on stderr, so that stdout stays the data.
    static func note(_ text: String) {
        let line = text + "\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    static func fail(_ message: String, status: Int32) -> Never {
        let line = "coalescectl: \(message)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
        exit(status)
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
        var time = time_t(seconds)
        var parts = tm()
        localtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %Z", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Label-value rows with the labels right-aligned, as `systemctl status` lays them out.
    static func table(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { label, value in
            String(repeating: " ", count: width - label.count) + label + ": " + value
        }.joined(separator: "\n")
    }
}
