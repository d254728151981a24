import ArgumentParser
import CoalesceCore
import CoalesceWire
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
                App.state(app),
                app["pid"]?.intValue.map { String($0) } ?? "-",
                app["launchUnit"]?.stringValue ?? "-",
                app["tasks"]?.intValue.map { String($0) } ?? "0",
                app["badge"]?.intValue.map { $0 == 0 ? "-" : String($0) } ?? "-",
                app["since"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
            ])
        }
        CtlOutput.table(
            header: ["APP", "STATE", "PID", "UNIT", "TASKS", "BADGE", "SINCE"], rows,
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
        let kinds = Self.kinds(app)
        let rows: [(String, String)] = [
                ("App", app["name"]?.stringValue ?? "?"),
                ("State", Self.state(app)),
                ("Since", app["since"]?.doubleValue.map(CtlOutput.timestamp) ?? "-"),
                ("PID", app["pid"]?.intValue.map { String($0) } ?? "none"),
                ("Attached", Self.attached(app)),
                ("Background tasks", app["tasks"]?.intValue.map { String($0) } ?? "0"),
                ("Owner", app["owner"]?.intValue.map { "uid \($0)" } ?? "?"),
                ("Background modes", (app["backgroundModes"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ").ifEmpty("none")),
                ("Exits on suspend", app["exitsOnSuspend"]?.boolValue == true ? "yes" : "no"),
                ("Launch unit", app["launchUnit"]?.stringValue ?? "none"),
                ("Window app ids", (app["windowIds"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ").ifEmpty("its name only")),
                ("Opens", Self.opens(app)),
                ("Suspension", app["suspension"]?.stringValue ?? "the daemon's default ([Apps] Suspension=)"),
                ("Kinds", kinds.first ?? "none declared (every kind is latest)"),
                ("Posters", Self.posters(app["posters"])),
                ("Topics", (app["topics"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ").ifEmpty("none")),
                ("Badge", app["badge"]?.intValue.map { $0 == 0 ? "none" : String($0) } ?? "none"),
                (
                    "Notifications",
                    "\(app["notificationsPending"]?.intValue ?? 0) pending, \(app["notificationsDelivered"]?.intValue ?? 0) delivered"
                ),
            ]
        // A kind a line, under the first, as systemctl status lists a unit's processes.
        let indent = String(repeating: " ", count: (rows.map(\.0.count).max() ?? 0) + 2)
        var lines = CtlOutput.table(rows).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if let at = lines.firstIndex(where: { $0.drop(while: { $0 == " " }).hasPrefix("Kinds: ") }) {
            lines.insert(contentsOf: kinds.dropFirst().map { indent + $0 }, at: at + 1)
        }
        CtlOutput.print(lines.joined(separator: "\n"))
    }
}

extension App {
    /// Each declared kind with its policy, by name: `mail.count: sum:unread, volatile, launches it into fetch, wakes
    /// it from suspension`.
    fileprivate static func kinds(_ app: JSONValue) -> [String] {
        guard let kinds = app["kinds"]?.objectValue else { return [] }
        return kinds.sorted { $0.key < $1.key }.map { kind, wire in
            guard let declared = KindDeclaration(wire: wire) else { return "\(kind): \(wire.jsonText)" }
            var text = "\(kind): \(declared.policy.text)"
            if declared.volatile { text += ", volatile" }
            if let mode = declared.backgroundMode { text += ", launches it into \(mode)" }
            if declared.wakes == .background { text += ", wakes it from suspension" }
            return text
        }
    }

    /// The URL schemes (with their colon) and MIME types the app declared it opens.
    fileprivate static func opens(_ app: JSONValue) -> String {
        let schemes = (app["urlSchemes"]?.arrayValue ?? []).compactMap(\.stringValue).map { $0 + ":" }
        let types = (app["mimeTypes"]?.arrayValue ?? []).compactMap(\.stringValue)
        return (schemes + types).joined(separator: ", ").ifEmpty("no URLs declared (its desktop file may add some)")
    }

    /// Who may post to the app besides its own user and root.
    fileprivate static func posters(_ posters: JSONValue?) -> String {
        guard let posters, let declared = Posters(wire: posters) else { return "its user and root" }
        if declared.anyone { return "anyone" }
        var parts: [String] = []
        if !declared.uids.isEmpty { parts.append("uid " + declared.uids.map { String($0) }.joined(separator: ", ")) }
        if !declared.groups.isEmpty { parts.append("group " + declared.groups.joined(separator: ", ")) }
        return (["its user and root"] + parts).joined(separator: "; ")
    }

    /// The app's state, with how its process is held while it is suspended: `suspended (frozen)`.
    static func state(_ app: JSONValue) -> String {
        let state = app["state"]?.stringValue ?? "?"
        guard let held = app["suspendedAs"]?.stringValue else { return state }
        return "\(state) (\(held))"
    }

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
