import CoalesceWire
import Varlink

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The app's local notifications: `io.coalesced.Notifications` for the app itself, on its request connection.
extension CoalescedApp {
    /// Schedules a request, replacing a pending one of the same id; it is on the daemon's disk when this returns.
    /// - Returns: When it fires next.
    /// - Throws: ``CoalescedError/invalidRequest(app:id:reason:)`` saying why the request is not one (an unknown time
    ///   zone, a calendar that matches no date, a repeating interval under 60 seconds…), and
    ///   ``CoalescedError/pendingLimit(app:limit:pending:)`` when the app has as many pending as it may.
    @discardableResult
    public func schedule(_ request: NotificationRequest) async throws(CoalescedError) -> Date {
        let parameters: JSONObject = ["request": try request.wire()]
        let reply = try await self.request("io.coalesced.Notifications.Schedule", parameters, includesApp: true)
        guard let next = reply["next"]?.doubleValue else {
            throw .connectionLost(reason: "a Schedule reply without next")
        }
        return Date(timeIntervalSince1970: next)
    }

    /// Removes the pending requests of these ids (ids not pending are passed over).
    /// - Returns: How many went.
    @discardableResult
    public func cancelNotifications(ids: [String]) async throws(CoalescedError) -> Int {
        try await self.count("io.coalesced.Notifications.Cancel", ["ids": .array(ids.map { .string($0) })], "cancelled")
    }

    /// Removes every pending request.
    /// - Returns: How many went.
    @discardableResult
    public func cancelAllNotifications() async throws(CoalescedError) -> Int {
        try await self.count("io.coalesced.Notifications.Cancel", ["all": true], "cancelled")
    }

    /// The pending requests, soonest first, each with its next fire date.
    public func pendingNotifications() async throws(CoalescedError) -> [PendingNotification] {
        let reply = try await self.request("io.coalesced.Notifications.ListPending", [:], includesApp: true)
        do throws(WireFormError) {
            return try (reply["pending"]?.arrayValue ?? []).map { entry throws(WireFormError) in
                PendingNotification(try AlertPendingForm(wire: entry))
            }
        } catch {
            throw .connectionLost(reason: "a ListPending reply with \(error.reason)")
        }
    }

    /// The delivered list, oldest first: what was presented and not removed.
    public func deliveredNotifications() async throws(CoalescedError) -> DeliveredNotifications {
        let reply = try await self.request("io.coalesced.Notifications.ListDelivered", [:], includesApp: true)
        do throws(WireFormError) {
            let presentations = try (reply["delivered"]?.arrayValue ?? []).map { entry throws(WireFormError) in
                NotificationPresentation(try AlertPresentationForm(wire: entry))
            }
            return DeliveredNotifications(presentations: presentations, dropped: Int(reply["dropped"]?.intValue ?? 0))
        } catch {
            throw .connectionLost(reason: "a ListDelivered reply with \(error.reason)")
        }
    }

    /// Removes the delivered list's entries of these request ids.
    /// - Returns: How many went.
    @discardableResult
    public func removeDeliveredNotifications(ids: [String]) async throws(CoalescedError) -> Int {
        let parameters: JSONObject = ["ids": .array(ids.map { .string($0) })]
        return try await self.count("io.coalesced.Notifications.RemoveDelivered", parameters, "removed")
    }

    /// Empties the delivered list.
    /// - Returns: How many entries went.
    @discardableResult
    public func removeAllDeliveredNotifications() async throws(CoalescedError) -> Int {
        try await self.count("io.coalesced.Notifications.RemoveDelivered", ["all": true], "removed")
    }

    /// Sets the app's badge (`GetApp` shows it); 0 clears it.
    public func setBadge(_ badge: Int) async throws(CoalescedError) {
        let parameters: JSONObject = ["badge": .int(Int64(badge))]
        _ = try await self.request("io.coalesced.Notifications.SetBadge", parameters, includesApp: true)
    }

    private func count(_ method: String, _ parameters: JSONObject, _ member: String) async throws(CoalescedError) -> Int {
        let reply = try await self.request(method, parameters, includesApp: true)
        guard let count = reply[member]?.intValue else { throw .connectionLost(reason: "a reply without \(member)") }
        return Int(count)
    }
}
