import ArgumentParser
import CoalesceCore
import CoalesceWire
import Systemd
import Varlink

/// `coalescectl notify …`: an app's local notifications (io.coalesced.Notifications).
struct Notify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Schedule, list and answer an app's local notifications (io.coalesced.Notifications).",
        subcommands: [
            NotifySchedule.self, NotifyCancel.self, NotifyPending.self, NotifyDelivered.self, NotifyRemove.self,
            NotifyRespond.self, NotifyBadge.self,
        ]
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
}

extension Notify {
    /// The entries of a reply's list `member`, each read with `read`; a reply without the list has none. An entry
    /// that is not the form the interface declares ends the command as an answer that is not Varlink does: half a
    /// list would look whole.
    static func entries<Form>(
        _ reply: JSONObject,
        _ member: String,
        of method: String,
        _ read: (JSONValue) throws(WireFormError) -> Form
    ) -> [Form] {
        do throws(WireFormError) {
            return try (reply[member]?.arrayValue ?? []).map { entry throws(WireFormError) in try read(entry) }
        } catch {
            CtlOutput.fail("the daemon's \(method) reply is not one coalescectl reads: \(error.reason)", status: CtlExit.protocolError)
        }
    }
}

struct NotifySchedule: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Schedule a notification for an app (Schedule); prints its next fire date.",
        discussion: """
            One of --at, --in and --on; none fires at once. --on takes a calendar event as systemd's OnCalendar= \
            writes one, with single values or '*': 'Mon *-*-* 08:30', '*-*-01 09:00:00 Europe/Berlin', '08:30', \
            '*-12-24 18:00'. Without a time zone it is floating local time: the machine's zone when it comes. \
            Scheduling an id again replaces that request.
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String
    @Argument(help: "The request's id within the app.") var id: String

    @Option(help: ArgumentHelp("Fire at this time: 'YYYY-MM-DD HH:MM[:SS]' in local time, or @SECONDS since the epoch.", valueName: "time"))
    var at: String?
    @Option(name: .customLong("in"), help: ArgumentHelp("Fire after this time span: 90s, 5min, 1h 30min.", valueName: "span"))
    var after: String?
    @Option(help: ArgumentHelp("Fire at the dates of this calendar event (OnCalendar= syntax).", valueName: "calendar"))
    var on: String?
    @Flag(help: "Fire at every date of --on, or every --in (then at least 60s).") var `repeat` = false

    @Option(help: "The title.") var title: String
    @Option(help: "The subtitle.") var subtitle: String?
    @Option(help: "The body.") var body: String?
    @Option(help: "Group it with others of this thread (and coalesce missed ones together).") var thread: String?
    @Option(help: "Set the app's badge to this when presented; 0 clears it.") var badge: Int?
    @Option(help: "A sound's name.") var sound: String?
    @Option(help: ArgumentHelp("banner (default) or alert, which interrupts the active app until answered.", valueName: "style"))
    var style: String?
    @Option(help: ArgumentHelp("Missed fires: deliver, coalesce (default), or a grace span such as 10min to drop those later.", valueName: "policy"))
    var late: String?
    @Option(
        name: .customLong("action"),
        help: ArgumentHelp("A button, ID:TITLE, or ID:TITLE:foreground to bring the app forward; repeatable.", valueName: "action")
    )
    var actions: [String] = []
    @Option(help: ArgumentHelp("User info handed back with each response: a JSON object.", valueName: "json")) var userInfo: String?

    func validate() throws {
        let triggers = [self.at, self.after, self.on].compactMap { $0 }
        if triggers.count > 1 { throw ValidationError("give one of --at, --in and --on") }
        if self.repeat, self.after == nil, self.on == nil { throw ValidationError("--repeat needs --in or --on") }
    }

    func run() throws {
        var trigger = AlertRequestForm.Trigger.now
        if let at = self.at {
            trigger = .at(seconds: try NotifyTime.instant(at))
        } else if let after = self.after {
            trigger = .after(try NotifyTime.duration(after, option: "--in", member: "after"), repeats: self.repeat)
        } else if let on = self.on {
            let calendar = try CalendarEvent.parse(on)
            trigger = .calendar(calendar.components, timeZone: calendar.timeZone, repeats: self.repeat)
        }
        let buttons = try self.actions.map { text in
            let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 2, !parts[0].isEmpty, !parts[1].isEmpty, parts.count == 2 || parts[2] == "foreground"
            else { throw ValidationError("--action '\(text)': expected ID:TITLE or ID:TITLE:foreground") }
            return AlertButton(id: parts[0], title: parts[1], foreground: parts.count == 3)
        }
        var userInfoText = "{}"
        if let userInfo {
            guard let value = try? JSONParser.parse(userInfo), value.isObject else {
                throw ValidationError("--user-info: expected a JSON object, such as '{\"note\": 7}'")
            }
            userInfoText = value.jsonText
        }
        let content = AlertContent(
            title: self.title, subtitle: self.subtitle ?? "", body: self.body ?? "", sound: self.sound, badge: self.badge,
            threadID: self.thread, actions: buttons, userInfo: userInfoText
        )
        var late = LatePolicy.coalesce
        switch self.late {
        case nil, "coalesce"?: break
        case "deliver"?: late = .deliver
        case let grace?: late = .dropAfter(try NotifyTime.duration(grace, option: "--late", member: "dropAfterSec"))
        }
        let style = self.style.flatMap(AlertStyle.init(rawValue:)) ?? .banner
        let form = AlertRequestForm(id: self.id, trigger: trigger, content: content, style: style, late: late)
        var request = form.wire(compact: true)
        // A style that is not one goes to the daemon as given, whose refusal names it as it does for any client.
        if let named = self.style, AlertStyle(rawValue: named) == nil, var object = request.objectValue {
            object["style"] = .string(named)
            request = .object(object)
        }
        guard let reply = self.global.call("io.coalesced.Notifications.Schedule", ["app": .string(self.app), "request": request])
        else { return }
        CtlOutput.print("next: " + (reply["next"]?.doubleValue.map(CtlOutput.timestamp) ?? "?"))
    }
}

struct NotifyCancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel an app's pending notifications: these ids, or --all (Cancel)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String
    @Argument(help: "The requests' ids.") var ids: [String] = []
    @Flag(help: "Cancel every pending request of the app.") var all = false

    func validate() throws {
        if self.all == !self.ids.isEmpty { throw ValidationError("give the ids to cancel, or --all") }
    }

    func run() throws {
        var parameters: JSONObject = ["app": .string(self.app)]
        if self.all { parameters["all"] = true } else { parameters["ids"] = .array(self.ids.map { .string($0) }) }
        guard let reply = self.global.call("io.coalesced.Notifications.Cancel", parameters) else { return }
        CtlOutput.print("cancelled: \(reply["cancelled"]?.intValue ?? 0)")
    }
}

struct NotifyPending: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending", abstract: "List an app's pending notifications, soonest first (ListPending)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.Notifications.ListPending", ["app": .string(self.app)]) else { return }
        let pending = Notify.entries(reply, "pending", of: "ListPending") { entry throws(WireFormError) in
            try AlertPendingForm(wire: entry)
        }
        let rows = pending.map { entry -> [String] in
            [
                entry.request.id, CtlOutput.timestamp(entry.next),
                NotifyTime.describe(entry.request.trigger, calendar: entry.calendar), entry.request.content.title,
            ]
        }
        CtlOutput.table(
            header: ["ID", "NEXT", "TRIGGER", "TITLE"], rows,
            summary: "\(pending.count) pending \(pending.count == 1 ? "notification" : "notifications").", legend: !self.global.noLegend
        )
    }
}

struct NotifyDelivered: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delivered", abstract: "List an app's delivered notifications, oldest first (ListDelivered)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.Notifications.ListDelivered", ["app": .string(self.app)]) else { return }
        let delivered = Notify.entries(reply, "delivered", of: "ListDelivered") { entry throws(WireFormError) in
            try AlertPresentationForm(wire: entry)
        }
        let rows = delivered.map { entry -> [String] in
            [
                String(entry.serial), entry.id, CtlOutput.timestamp(entry.date), String(entry.count),
                entry.late ? "late" : "-", entry.content.title,
            ]
        }
        let dropped = reply["dropped"]?.intValue ?? 0
        var summary = "\(delivered.count) delivered \(delivered.count == 1 ? "notification" : "notifications")"
        if dropped > 0 { summary += "; \(dropped) older ones went out of the list for room" }
        CtlOutput.table(header: ["SERIAL", "ID", "DATE", "FIRES", "LATE", "TITLE"], rows, summary: summary + ".", legend: !self.global.noLegend)
    }
}

struct NotifyRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove entries from an app's delivered list: these ids, or --all (RemoveDelivered)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String
    @Argument(help: "The requests' ids.") var ids: [String] = []
    @Flag(help: "Empty the app's delivered list.") var all = false

    func validate() throws {
        if self.all == !self.ids.isEmpty { throw ValidationError("give the ids to remove, or --all") }
    }

    func run() throws {
        var parameters: JSONObject = ["app": .string(self.app)]
        if self.all { parameters["all"] = true } else { parameters["ids"] = .array(self.ids.map { .string($0) }) }
        guard let reply = self.global.call("io.coalesced.Notifications.RemoveDelivered", parameters) else { return }
        CtlOutput.print("removed: \(reply["removed"]?.intValue ?? 0)")
    }
}

struct NotifyRespond: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "respond",
        abstract: "Answer a notification for the user (Respond): default opens it, dismiss, or one of its actions' ids."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String
    @Argument(help: "The request's id.") var id: String
    @Argument(help: "default, dismiss, or an action's id.") var action: String = "default"
    @Option(help: "What the user typed.") var text: String?

    func run() throws {
        let parameters = AlertResponseForm(id: self.id, action: self.action, text: self.text).respond(app: self.app)
        guard self.global.call("io.coalesced.Notifications.Respond", parameters) != nil else { return }
        CtlOutput.print("answered")
    }
}

struct NotifyBadge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "badge", abstract: "Show an app's badge, or set it (SetBadge); 0 clears it."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions
    @Argument(help: "The app.", completion: AppNameCompletion.kind) var app: String
    @Argument(help: "The badge to set.") var badge: Int?

    func run() throws {
        if let badge {
            guard badge >= 0 else { throw ValidationError("a badge is 0 or more") }
            guard self.global.call("io.coalesced.Notifications.SetBadge", ["app": .string(self.app), "badge": .int(Int64(badge))]) != nil
            else { return }
            CtlOutput.print("badge: \(badge)")
        } else {
            guard let reply = self.global.call("io.coalesced.Notifications.ListDelivered", ["app": .string(self.app)]) else { return }
            CtlOutput.print("badge: \(reply["badge"]?.intValue ?? 0)")
        }
    }
}

/// Times as `notify schedule` takes them and `notify pending` shows them.
enum NotifyTime {
    /// `YYYY-MM-DD HH:MM[:SS]` in local time, or `@SECONDS`.
    static func instant(_ text: String) throws -> Double {
        if text.hasPrefix("@") {
            guard let seconds = Double(text.dropFirst()) else { throw ValidationError("--at '\(text)': expected @SECONDS since the epoch") }
            return seconds
        }
        let fail = ValidationError("--at '\(text)': expected 'YYYY-MM-DD HH:MM[:SS]' in local time, or @SECONDS")
        let halves = text.split(separator: " ", omittingEmptySubsequences: true)
        guard halves.count == 2 else { throw fail }
        let date = halves[0].split(separator: "-", omittingEmptySubsequences: false).map { Int32($0) }
        let time = halves[1].split(separator: ":", omittingEmptySubsequences: false).map { Int32($0) }
        guard date.count == 3, time.count == 2 || time.count == 3, !(date + time).contains(nil) else { throw fail }
        let second = time.count == 3 ? time[2]! : 0
        guard (1970...2199).contains(date[0]!), (1...12).contains(date[1]!), (1...31).contains(date[2]!),
            (0...23).contains(time[0]!), (0...59).contains(time[1]!), (0...60).contains(second)
        else { throw fail }
        let parts = CalendarTime.Parts(
            year: date[0]!, month: date[1]!, day: date[2]!, hour: time[0]!, minute: time[1]!, second: second)
        guard let seconds = CalendarTime.seconds(ofLocal: parts) else { throw fail }
        return Double(seconds)
    }

    /// A systemd time span: `90`, `90s`, `5min`, `1h 30min`, `500ms`.
    static func span(_ text: String, option: String) throws -> Double {
        let units: [(String, Double)] = [
            ("ms", 0.001), ("msec", 0.001), ("s", 1), ("sec", 1), ("second", 1), ("seconds", 1), ("m", 60), ("min", 60),
            ("minute", 60), ("minutes", 60), ("h", 3600), ("hr", 3600), ("hour", 3600), ("hours", 3600), ("d", 86400),
            ("day", 86400), ("days", 86400), ("w", 604_800), ("week", 604_800), ("weeks", 604_800),
        ]
        var total = 0.0
        var rest = Substring(text.filter { $0 != " " })
        guard !rest.isEmpty else { throw ValidationError("\(option) '\(text)': expected a time span such as 90s or 5min") }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            let unit = rest.dropFirst(number.count).prefix { $0.isLetter }
            guard let value = Double(number), let factor = unit.isEmpty ? 1 : units.first(where: { $0.0 == unit })?.1 else {
                throw ValidationError("\(option) '\(text)': expected a time span such as 90s, 5min or 1h 30min")
            }
            total += value * factor
            rest = rest.dropFirst(number.count + unit.count)
        }
        return total
    }

    /// A systemd time span (``span(_:option:)``) as the interface's `member` takes it.
    /// - Throws: a `ValidationError` naming the option, for a span the interface does not take (a billion seconds
    ///   or more), with the reason the daemon gives.
    static func duration(_ text: String, option: String, member: String) throws -> Duration {
        do {
            return try AlertRequestForm.duration(try self.span(text, option: option), member)
        } catch let error as WireFormError {
            throw ValidationError("\(option) '\(text)': \(error.reason)")
        }
    }

    /// A trigger in words for the pending table: `after 90s`, `at …`, `Mon *-*-* 08:30:00, repeats`.
    /// - Parameter calendar: the calendar trigger as the daemon spells it (``AlertPendingForm/calendar``).
    static func describe(_ trigger: AlertRequestForm.Trigger, calendar: String?) -> String {
        switch trigger {
        case .now: return "now"
        case .at(let seconds): return "at " + CtlOutput.timestamp(seconds)
        case .after(let interval, let repeats):
            return (repeats ? "every " : "after ") + CtlOutput.seconds(AlertRequestForm.seconds(interval))
        case .calendar(_, _, let repeats):
            guard let calendar else { return "?" }
            return calendar + (repeats ? ", repeats" : "")
        }
    }
}

/// Calendar events in systemd's OnCalendar= notation, for the single values and `*` a notification's components
/// take: `[WEEKDAY] [YEAR-MONTH-DAY] [HOUR:MINUTE[:SECOND]] [ZONE]`. A date left out is `*-*-*`, a time left out
/// 00:00:00, seconds left out 00, as systemd reads them.
enum CalendarEvent {
    static let weekdays = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    static func parse(_ text: String) throws -> (components: CalendarComponents, timeZone: String?) {
        func fail(_ why: String) -> ValidationError {
            ValidationError("--on '\(text)': \(why); expected [WEEKDAY] [YYYY-MM-DD] [HH:MM[:SS]] [ZONE] with numbers or '*', such as 'Mon *-*-* 08:30'")
        }
        var words = text.split(separator: " ").map(String.init)
        var weekday: Int?
        var timeZone: String?
        let names = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
        if let first = words.first?.lowercased(),
            let day = self.weekdays.firstIndex(of: first) ?? names.firstIndex(of: first)
        {
            weekday = day + 1
            words.removeFirst()
        }
        if let last = words.last, last.contains("/") || last == "UTC" {
            timeZone = last
            words.removeLast()
        }
        func field(_ text: Substring, _ name: String) throws -> Int? {
            if text == "*" { return nil }
            guard let value = Int(text) else { throw fail("'\(text)' is not a number or '*' for the \(name)") }
            return value
        }
        var date: [Substring] = ["*", "*", "*"]
        var time: [Substring] = ["00", "00", "00"]
        for word in words {
            if word.contains("-") {
                date = word.split(separator: "-", omittingEmptySubsequences: false)
                if date.count == 2 { date.insert("*", at: 0) }
                guard date.count == 3 else { throw fail("'\(word)' is not a date") }
            } else if word.contains(":") {
                time = word.split(separator: ":", omittingEmptySubsequences: false)
                if time.count == 2 { time.append("00") }
                guard time.count == 3 else { throw fail("'\(word)' is not a time") }
            } else {
                throw fail("'\(word)' is neither a date nor a time")
            }
        }
        let components = CalendarComponents(
            year: try field(date[0], "year"), month: try field(date[1], "month"), day: try field(date[2], "day"),
            weekday: weekday, hour: try field(time[0], "hour"), minute: try field(time[1], "minute"),
            second: try field(time[2], "second")
        )
        return (components, timeZone)
    }
}
