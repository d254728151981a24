import ArgumentParser
import Varlink

struct Apps: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the registered apps (io.coalesced.System.ListApps)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.System.ListApps") else { return }
        let apps = reply["apps"]?.arrayValue ?? []
        var rows: [[String]] = []
        for app in apps {
            rows.append([
                app["name"]?.stringValue ?? "?",
                app["state"]?.stringValue ?? "?",
                app["pid"]?.intValue.map { String($0) } ?? "-",
                app["launchUnit"]?.stringValue ?? "-",
                app["tasks"]?.intValue.map { String($0) } ?? "0",
                app["since"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
            ])
        }
        CtlOutput.table(
            header: ["APP", "STATE", "PID", "UNIT", "TASKS", "SINCE"], rows,
            summary: "\(apps.count) \(apps.count == 1 ? "app" : "apps") listed.", legend: !self.global.noLegend
        )
    }
}

struct App: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one app (io.coalesced.System.GetApp).")

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name, such as org.example.mail.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        guard let reply = self.global.call("io.coalesced.System.GetApp", ["app": .string(self.name)]) else { return }
        let app = reply["app"] ?? .null
        CtlOutput.print(
            CtlOutput.table([
                ("App", app["name"]?.stringValue ?? "?"),
                ("State", app["state"]?.stringValue ?? "?"),
                ("Since", app["since"]?.doubleValue.map(CtlOutput.timestamp) ?? "-"),
                ("PID", app["pid"]?.intValue.map { String($0) } ?? "none"),
                ("Attached", Self.attached(app)),
                ("Background tasks", app["tasks"]?.intValue.map { String($0) } ?? "0"),
                ("Owner", app["owner"]?.intValue.map { "uid \($0)" } ?? "?"),
                ("Background modes", (app["backgroundModes"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ").ifEmpty("none")),
                ("Exits on suspend", app["exitsOnSuspend"]?.boolValue == true ? "yes" : "no"),
                ("Launch unit", app["launchUnit"]?.stringValue ?? "none"),
            ])
        )
    }
}

extension App {
    /// Whether the app's process has its stream attached; a running app without one outlived a restart of the daemon.
    fileprivate static func attached(_ app: JSONValue) -> String {
        if app["attached"]?.boolValue == true { return "yes" }
        if app["state"]?.stringValue == "notRunning" { return "no" }
        return "no (waiting for its process to attach again after a restart of the daemon)"
    }
}

extension String {
    fileprivate func ifEmpty(_ replacement: String) -> String { self.isEmpty ? replacement : self }
}
