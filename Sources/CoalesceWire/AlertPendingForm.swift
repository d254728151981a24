public import Varlink

/// A pending request as io.coalesced.Notifications' `Pending` writes it, in ListPending's reply. The daemon writes
/// it, and the client library and coalescectl read it, here.
public struct AlertPendingForm: Sendable, Hashable {
    public var request: AlertRequestForm
    /// The next fire date, in seconds since the Unix epoch.
    public var next: Double
    /// The last fire date, in seconds since the Unix epoch, if it fired.
    public var lastFire: Double?
    /// A calendar trigger as systemd's `OnCalendar=` writes it, with the components left out spelled as they are
    /// read: `Mon *-*-* 08:30:00 Europe/Berlin`; `nil` for other triggers.
    public var calendar: String?

    public init(request: AlertRequestForm, next: Double, lastFire: Double? = nil, calendar: String? = nil) {
        self.request = request
        self.next = next
        self.lastFire = lastFire
        self.calendar = calendar
    }

    /// Every member, the request's too (all of its content's, ``AlertRequestForm/wire(compact:)``); `lastFire` and
    /// `calendar` when set.
    public var wire: JSONObject {
        var object: JSONObject = ["request": self.request.wire(), "next": .double(self.next)]
        if let lastFire = self.lastFire { object["lastFire"] = .double(lastFire) }
        if let calendar = self.calendar { object["calendar"] = .string(calendar) }
        return object
    }

    /// Reads the wire form (``wire``); `lastFire` and `calendar` may be left out or null.
    /// - Throws: when it is not an object, `request` or `next` is missing, `lastFire` is not a number or
    ///   `calendar` not a string, or the request is not one (with ``AlertRequestForm/reading(wire:zone:)``'s reason).
    public init(wire value: JSONValue) throws(WireFormError) {
        guard let object = value.objectValue else { throw WireFormError("a pending entry is an object") }
        guard let request = object["request"], let next = object["next"]?.doubleValue else {
            throw WireFormError("a pending entry without request or next")
        }
        var lastFire: Double?
        if let member = object["lastFire"], member != .null {
            guard let seconds = member.doubleValue else {
                throw WireFormError("lastFire \(member.jsonText) is not a number of seconds since the epoch")
            }
            lastFire = seconds
        }
        var calendar: String?
        if let member = object["calendar"], member != .null {
            guard let text = member.stringValue else { throw WireFormError("calendar \(member.jsonText) is not a string") }
            calendar = text
        }
        self.init(request: try AlertRequestForm.reading(wire: request), next: next, lastFire: lastFire, calendar: calendar)
    }
}
