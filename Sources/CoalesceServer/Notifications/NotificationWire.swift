import CoalesceCore
import CoalesceWire
import Varlink

/// Local notifications as io.coalesced.Notifications writes them: requests, pending entries and presentations
/// to and from JSON. The store keeps a request in the same form, so that what a client scheduled and what the
/// store holds are read by one function.
enum NotificationWire {
    /// A request as a client sent it (or the store kept it); the Varlink layer has checked the members' types.
    /// - Throws: the reason it is not a request the scheduler can take, for ``NotificationError/invalidRequest``.
    static func request(_ value: JSONValue, zones: ZoneDatabase) throws(WireProblem) -> AlertRequest {
        var rules: ZoneRules?
        let form: AlertRequestForm
        do throws(WireFormError) {
            form = try AlertRequestForm.reading(wire: value) { name throws(WireFormError) in
                do throws(ZoneRulesError) {
                    rules = try zones.rules(named: name)
                } catch {
                    throw WireFormError(error.description)
                }
            }
        } catch {
            throw WireProblem(error.reason)
        }
        let trigger: AlertTrigger
        switch form.trigger {
        case .now: trigger = .now
        case .at(let seconds): trigger = .at(WallTime(nanoseconds: Int64((seconds * 1e9).rounded())))
        case .after(let interval, let repeats): trigger = .after(interval, repeats: repeats)
        case .calendar(let components, _, let repeats):
            trigger = .calendar(components, zone: rules.map { .zoned($0) } ?? .floating, repeats: repeats)
        }
        return AlertRequest(id: form.id, trigger: trigger, content: form.content, style: form.style, late: form.late)
    }

    static func json(_ request: AlertRequest) -> JSONValue { self.form(request).wire() }

    /// A request as the interface writes it: its instant in seconds since the epoch, its calendar's zone by name.
    static func form(_ request: AlertRequest) -> AlertRequestForm {
        let trigger: AlertRequestForm.Trigger
        switch request.trigger {
        case .now: trigger = .now
        case .at(let date): trigger = .at(seconds: self.instant(date))
        case .after(let interval, let repeats): trigger = .after(interval, repeats: repeats)
        case .calendar(let components, let zone, let repeats):
            var name: String?
            if case .zoned(let rules) = zone { name = rules.name }
            trigger = .calendar(components, timeZone: name, repeats: repeats)
        }
        return AlertRequestForm(id: request.id, trigger: trigger, content: request.content, style: request.style, late: request.late)
    }

    /// A pending request as ListPending answers it, with a calendar trigger spelled as `OnCalendar=` writes it.
    static func pending(_ entry: PendingAlert) -> AlertPendingForm {
        var calendar: String?
        if case .calendar(let components, let zone, _) = entry.request.trigger {
            calendar = components.description
            if case .zoned(let rules) = zone { calendar? += " " + rules.name }
        }
        return AlertPendingForm(
            request: self.form(entry.request), next: self.instant(entry.next), lastFire: entry.lastFire.map(self.instant),
            calendar: calendar
        )
    }

    static func seconds(_ date: WallTime) -> JSONValue { .double(self.instant(date)) }

    /// An instant as the interface carries it: seconds since the epoch.
    private static func instant(_ date: WallTime) -> Double { Double(date.nanoseconds) / 1e9 }

    /// A presentation as the delivered list, agents and the app's willPresent event carry it.
    static func json(_ presentation: AlertPresentation, serial: Int64) -> JSONObject {
        AlertPresentationForm(
            app: presentation.app.value, id: presentation.id, serial: serial, content: presentation.content,
            style: presentation.style, date: self.instant(presentation.date), count: presentation.count,
            late: presentation.late
        ).wire
    }

    /// A pending request's record as the store keeps it: the request, and the instants in whole nanoseconds.
    static func storeText(_ record: AlertRecord) -> String {
        var object: JSONObject = [
            "request": self.json(record.request), "since": .int(record.since.nanoseconds), "fires": .int(Int64(record.fires)),
        ]
        if let last = record.lastFire { object["lastFire"] = .int(last.nanoseconds) }
        if let due = record.intervalDue { object["intervalDue"] = .int(due.nanoseconds) }
        return JSONValue.object(object).jsonText
    }

    /// A record the store kept.
    /// - Throws: why it cannot be read back (the store is damaged, or a zone it names is gone).
    static func record(_ text: String, app: AppName, zones: ZoneDatabase) throws(WireProblem) -> AlertRecord {
        let value: JSONValue
        do { value = try JSONParser.parse(text) } catch { throw WireProblem(error.description) }
        guard let object = value.objectValue, let request = object["request"], let since = object["since"]?.intValue,
            let fires = object["fires"]?.intValue
        else { throw WireProblem("a stored request lacks request, since or fires") }
        let parsed = try Self.request(request, zones: zones)
        // Only what Schedule takes: a damaged row would otherwise stop the scheduler (a repeating interval of 0 has
        // no end of fires, an instant long before 1970 overflows its arithmetic). A control character in a name is
        // an older daemon's request, taken up as it was, and the rest of it checked all the same.
        do throws(AlertError) {
            try parsed.validate(namesAsTheyAre: true)
        } catch {
            throw WireProblem("the stored request is not one Schedule takes: \(error)")
        }
        guard fires >= 0, fires < 1 << 40 else { throw WireProblem("a stored request has fired \(fires) times") }
        func instant(_ name: String, _ nanoseconds: Int64) throws(WireProblem) -> WallTime {
            guard nanoseconds >= 0, nanoseconds < 9_000_000_000_000_000_000 else {
                throw WireProblem("the stored \(name) \(nanoseconds) ns is not an instant from 1970 on")
            }
            return WallTime(nanoseconds: nanoseconds)
        }
        return AlertRecord(
            key: AlertKey(app: app, id: parsed.id), request: parsed, since: try instant("since", since),
            lastFire: try object["lastFire"]?.intValue.map { nanoseconds throws(WireProblem) in try instant("lastFire", nanoseconds) },
            fires: Int(fires),
            intervalDue: try object["intervalDue"]?.intValue.map { nanoseconds throws(WireProblem) in try instant("intervalDue", nanoseconds) }
        )
    }
}

/// Why a request's JSON is not one, said for the person who sent it.
struct WireProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
