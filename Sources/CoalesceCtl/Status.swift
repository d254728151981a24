import ArgumentParser
import Varlink

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what the daemon is doing (io.coalesced.System.Stats).")

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.System.Stats") else { return }
        let stats = reply["stats"] ?? .null
        func int(_ key: String) -> String { stats[key]?.intValue.map { String($0) } ?? "?" }
        let limits = stats["limits"] ?? .null
        CtlOutput.print(
            CtlOutput.table([
                ("Socket", self.global.socketPath),
                ("Version", stats["version"]?.stringValue ?? "?"),
                ("Uptime", Self.format(seconds: stats["uptimeSec"]?.doubleValue ?? 0)),
                ("Connections", "\(int("connections")) open, \(int("connectionsTotal")) since start, \(int("connectionsRefused")) refused"),
                ("Calls", int("calls")),
                ("Apps", Self.apps(stats)),
                ("Transitions", int("transitions")),
                ("Store", Self.store(stats["storeWritable"])),
                ("Set aside", Self.setAside(stats["setAside"] ?? .null)),
                ("Events", Self.events(stats["events"] ?? .null)),
                ("Held in memory", Self.held(stats["quotas"] ?? .null)),
                ("Your quotas", Self.caller(stats["quotas"]?["caller"] ?? .null)),
                ("Protocol errors", int("protocolErrors")),
                ("Reloads", "\(int("reloads")) done, \(int("failedReloads")) refused"),
                (
                    "Limits",
                    "\(limits["maxMessageSize"]?.intValue.map { String($0) } ?? "?") bytes per message, "
                        + "\(limits["maxConnections"]?.intValue.map { String($0) } ?? "?") connections"
                ),
                ("Deadlines", Self.deadlines(limits)),
                ("Memory pressure", Self.memoryPressure(stats["memoryPressure"] ?? .null)),
                ("System", Self.system(stats["system"] ?? .null)),
                ("Journal", Self.journal(stats["journal"] ?? .null)),
            ])
        )
    }

    /// "none", or "org.example.mail: 3 rows (what it holds of mail.received cannot be read), set aside …": apps whose
    /// held data a start could not read back.
    static func setAside(_ list: JSONValue) -> String {
        guard let entries = list.arrayValue else { return "?" }
        guard !entries.isEmpty else { return "none" }
        return entries.map { entry in
            let rows = entry["rows"]?.intValue ?? 0
            let when = entry["at"]?.doubleValue.map { ", set aside \(CtlOutput.timestamp($0))" } ?? ""
            return "\(entry["app"]?.stringValue ?? "?"): \(rows) row\(rows == 1 ? "" : "s") (\(entry["reason"]?.stringValue ?? "?"))\(when)"
        }.joined(separator: "; ") + "; kept in the store's setAside table"
    }

    /// "sleep inhibitor held, slept 2026-11-27 06:00:01 UTC, woke …; lock seat0 session 3 unlocked": what the
    /// daemon follows of the system around the apps.
    static func system(_ system: JSONValue) -> String {
        guard system != .null else { return "?" }
        var parts: [String] = []
        if let sleep = system["sleep"], sleep != .null {
            var text = "sleep inhibitor " + (sleep["inhibitorHeld"] == true ? "held" : "not held")
            if let problem = sleep["problem"]?.stringValue { text += " (\(problem))" }
            if let slept = sleep["lastSleep"]?.doubleValue { text += ", slept \(CtlOutput.timestamp(slept))" }
            if let woke = sleep["lastWake"]?.doubleValue { text += ", woke \(CtlOutput.timestamp(woke))" }
            parts.append(text)
        } else {
            parts.append("sleep not followed")
        }
        if let lock = system["lock"], lock != .null {
            let session = lock["session"]?.stringValue.map { "session \($0)" } ?? "no session"
            parts.append("lock \(lock["seat"]?.stringValue ?? "?") \(session) \(lock["locked"] == true ? "locked" : "unlocked")")
        } else {
            parts.append("lock not followed")
        }
        if let bus = system["bus"]?.stringValue, bus != "connected" { parts.append("no bus: \(bus)") }
        return parts.joined(separator: "; ")
    }

    /// "followed, 2 watches; 1200 entries read, 3 matched, 2 posts; lag 0s", or why the reader does not run: the
    /// journal watches' reader and what they did since start.
    static func journal(_ journal: JSONValue) -> String {
        guard let followed = journal["followed"]?.boolValue else { return "?" }
        func int(_ key: String) -> Int64 { journal[key]?.intValue ?? 0 }
        func counted(_ count: Int64, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
        let watches = "\(int("watches")) \(int("watches") == 1 ? "watch" : "watches")"
        guard followed else {
            let reason = journal["reason"]?.stringValue.map { " (\($0))" } ?? ""
            return "not followed\(reason), \(watches)"
        }
        var text = "followed, \(watches); \(int("entriesRead")) entries read, \(int("matched")) matched, "
            + counted(int("posts"), "post")
        let untested = int("untested")
        if untested > 0 { text += ", \(untested) untested (too costly for their pattern)" }
        let rewinds = int("rewinds")
        if rewinds > 0 { text += ", read again \(counted(rewinds, "time")) after a store write failed" }
        let lag = journal["lagSec"]?.doubleValue ?? 0
        return text + "; lag " + (lag < 1 ? CtlOutput.seconds(lag) : Self.format(seconds: lag))
    }

    /// "acknowledge 5s, background tasks 30s, launch 10s"; a span the daemon has none of (null) is `infinity`.
    static func deadlines(_ limits: JSONValue) -> String {
        func span(_ key: String) -> String {
            switch limits[key] {
            case nil: return "?"
            case .null?: return "infinity"
            case let value?: return value.doubleValue.map(CtlOutput.seconds) ?? "?"
            }
        }
        return "acknowledge \(span("acknowledgeTimeoutSec")), background tasks \(span("backgroundTaskBudgetSec")), "
            + "launch \(span("launchTimeoutSec"))"
    }

    /// "kernel triggers on /proc/pressure/memory (warning some 70ms 2s, critical full 100ms 2s); normal, some avg10
    /// 0.00%, full avg10 0.00%; 2 warnings, 1 purge since start", or why it is read periodically or not at all.
    static func memoryPressure(_ pressure: JSONValue) -> String {
        guard let mode = pressure["mode"]?.stringValue else { return "?" }
        let file = pressure["file"]?.stringValue ?? "?"
        let reason = pressure["reason"]?.stringValue ?? "?"
        let how: String
        switch mode {
        case "triggers": how = "kernel triggers on \(file)"
        case "polling": how = "reading \(file) periodically (\(reason))"
        default: return "not followed (\(reason))"
        }
        let levels = "warning \(pressure["warning"]?.stringValue ?? "?"), critical \(pressure["critical"]?.stringValue ?? "?")"
        var now = pressure["level"]?.stringValue ?? "?"
        if let some = pressure["someAvg10"]?.doubleValue, let full = pressure["fullAvg10"]?.doubleValue {
            now += ", some avg10 \(Self.percent(some)), full avg10 \(Self.percent(full))"
        }
        let warnings = pressure["warnings"]?.intValue ?? 0
        let purges = pressure["purges"]?.intValue ?? 0
        return "\(how) (\(levels)); \(now); \(warnings) warning\(warnings == 1 ? "" : "s"), "
            + "\(purges) purge\(purges == 1 ? "" : "s") since start"
    }

    /// "3.47%": a PSI average, as the kernel writes it.
    static func percent(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)%"
    }

    /// "3 registered: 1 active, 2 suspended".
    static func apps(_ stats: JSONValue) -> String {
        let registered = "\(stats["apps"]?.intValue ?? 0) registered"
        let running = ["active", "inactive", "background", "suspended"].compactMap { state -> String? in
            guard let count = stats["states"]?[state]?.intValue, count > 0 else { return nil }
            return "\(count) \(state)"
        }
        return running.isEmpty ? registered : registered + ": " + running.joined(separator: ", ")
    }

    /// "writable", or what a full disk means.
    static func store(_ writable: JSONValue?) -> String {
        switch writable?.boolValue {
        case true?: "writable"
        case false?: "its file system is full: reads are served, writes refused until there is room"
        case nil: "?"
        }
    }

    /// "12 posts sent at once, 40 held; 3 kinds held now, 1 unacknowledged".
    static func events(_ events: JSONValue) -> String {
        func int(_ key: String) -> Int64 { events[key]?.intValue ?? 0 }
        return "\(int("postsSent")) posts sent at once, \(int("postsHeld")) held; "
            + "\(int("kindsHeld")) kinds held now, \(int("unacknowledged")) unacknowledged"
    }

    /// "1.2 MiB of 256.0 MiB (HeldBytes=)".
    static func held(_ quotas: JSONValue) -> String {
        "\(Self.bytes(quotas["heldBytes"]?.intValue)) of \(Self.bytes(quotas["heldBytesLimit"]?.intValue)) (HeldBytes=)"
    }

    /// "uid 1000: 3 of 64 apps (UserApps=), 1.0 KiB of 16.0 MiB held (UserHeldBytes=)".
    static func caller(_ user: JSONValue) -> String {
        let uid = user["uid"]?.intValue.map { String($0) } ?? "?"
        let apps = user["apps"]?.intValue.map { String($0) } ?? "?"
        let appsLimit = user["appsLimit"]?.intValue.map { String($0) } ?? "?"
        return "uid \(uid): \(apps) of \(appsLimit) apps (\(user["appsQuota"]?.stringValue ?? "?")=), "
            + "\(Self.bytes(user["heldBytes"]?.intValue)) of \(Self.bytes(user["heldBytesLimit"]?.intValue)) held "
            + "(\(user["heldBytesQuota"]?.stringValue ?? "?")=)"
    }

    /// Bytes as systemd prints sizes: "512B", "1.5K"... here spelled out: "512 B", "1.5 KiB", "16.0 MiB".
    static func bytes(_ count: Int64?) -> String {
        guard let count else { return "?" }
        var value = Double(count)
        for unit in ["B", "KiB", "MiB", "GiB"] {
            if value < 1024 || unit == "GiB" {
                return unit == "B" ? "\(count) B" : "\((value * 10).rounded() / 10) \(unit)"
            }
            value /= 1024
        }
        return "\(count) B"
    }

    /// "2d 3h 4min 5s", as systemd prints time spans.
    static func format(seconds: Double) -> String {
        var rest = Int(seconds)
        var parts: [String] = []
        for (unit, size) in [("d", 86400), ("h", 3600), ("min", 60)] where rest >= size {
            parts.append("\(rest / size)\(unit)")
            rest %= size
        }
        if rest > 0 || parts.isEmpty { parts.append("\(rest)s") }
        return parts.joined(separator: " ")
    }
}
