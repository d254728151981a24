@testable import CoalesceClient
import CoalesceTestSupport
import Foundation
import Synchronization
import Testing
import Varlink

/// The Swift client library's local notifications against the real daemon: the app schedules through its
/// `CoalescedApp`, receives willPresent and responses through its delegate, and the user's side (Respond) is a
/// Varlink client on the real socket.
@Suite struct ClientNotificationTests {
    static let notes = "org.example.notes"

    struct Plant: Codable, Equatable {
        var plant: String
    }

    /// A daemon with its System client.
    final class Device: @unchecked Sendable {
        let daemon: DaemonProcess
        let client: VarlinkClient

        init(configuration: String = "") async throws {
            // The app is this test process: no deadline may pass, or the daemon would kill the test run.
            self.daemon = try DaemonProcess(configuration: noDeadlines + configuration)
            try await onThread { [daemon] in try daemon.waitUntilReady() }
            self.client = try testClient(self.daemon.socketPath)
        }

        func app(delegate: (any AppDelegate)? = nil) -> CoalescedApp {
            // The app is this test process: it asks to be left running while suspended.
            CoalescedApp(
                AppDeclaration(name: ClientNotificationTests.notes, suspension: .cooperative),
                socketPath: self.daemon.socketPath, delegate: delegate
            )
        }

        @discardableResult
        func call(_ method: String, _ parameters: JSONObject = [:]) async throws -> JSONObject {
            try await onThread { try self.client.call(method, parameters) }
        }

        func getApp() async throws -> JSONValue? {
            try await self.call("io.coalesced.System.GetApp", ["app": .string(ClientNotificationTests.notes)])["app"]
        }
    }

    /// Records the notification callbacks it is handed.
    final class Recorder: AppDelegate {
        let presentations = Mutex<[NotificationPresentation]>([])
        let responses = Mutex<[NotificationResponse]>([])
        let events = Mutex<[Event]>([])

        func app(_ app: CoalescedApp, willPresent presentation: NotificationPresentation) async {
            self.presentations.withLock { $0.append(presentation) }
        }

        func app(_ app: CoalescedApp, didReceive response: NotificationResponse) async {
            self.responses.withLock { $0.append(response) }
        }

        func app(_ app: CoalescedApp, didReceive event: Event) async {
            self.events.withLock { $0.append(event) }
        }
    }

    @Test func aNotificationFiringWhileActiveComesAsWillPresentAndItsResponseReachesTheDelegate() async throws {
        let device = try await Device()
        let recorder = Recorder()
        let app = device.app()
        try await app.register()
        let loop = Task { try await app.run(delegate: recorder) }
        // Attaching launched it into the foreground: active.
        try await onThread { _ = try waitForApp(device.client, Self.notes, "state", "active") }

        var content = NotificationContent(
            title: "Water the plants", body: "The fern is dry", threadID: "garden",
            actions: [NotificationAction(id: "done", title: "Done"), NotificationAction(id: "later", title: "Later", foreground: true)]
        )
        try content.setUserInfo(Plant(plant: "fern"))
        let request = NotificationRequest(id: "water", trigger: .after(.seconds(1)), content: content)
        let before = Date()
        let next = try await app.schedule(request)
        #expect(next > before && next < before.addingTimeInterval(5), "next \(next) is about a second after \(before)")

        // Pending until it fires, with the date Schedule returned and the request as it was scheduled (unless it
        // fired already: the test's machine may be slow).
        let pending = try await app.pendingNotifications()
        if let entry = pending.first {
            #expect(pending.count == 1)
            #expect(entry.request == request)
            #expect(abs(entry.next.timeIntervalSince(next)) < 0.001 && entry.lastFire == nil && entry.calendar == nil)
        } else {
            #expect(try await app.deliveredNotifications().presentations.count == 1, "neither pending nor delivered")
        }

        try await waitUntil("willPresent") { recorder.presentations.withLock { !$0.isEmpty } }
        let presentation = try #require(recorder.presentations.withLock { $0.first })
        #expect(presentation.app == Self.notes && presentation.id == "water" && presentation.serial == 1)
        #expect(presentation.content == content && presentation.style == .banner)
        #expect(presentation.count == 1 && !presentation.late)
        #expect(abs(presentation.date.timeIntervalSince(next)) < 0.001)
        #expect(try presentation.content.decodeUserInfo(Plant.self) == Plant(plant: "fern"))
        #expect(recorder.events.withLock { $0.isEmpty }, "the notification came as willPresent, not as an event")
        #expect(try await app.pendingNotifications().isEmpty)
        #expect(try await app.deliveredNotifications() == DeliveredNotifications(presentations: [presentation], dropped: 0))

        // The user answers with one of its actions: the delegate hears it with the userInfo, and what was typed.
        try await device.call(
            "io.coalesced.Notifications.Respond",
            ["app": .string(Self.notes), "id": "water", "action": "done", "text": "watered"]
        )
        try await waitUntil("didReceive response") { recorder.responses.withLock { !$0.isEmpty } }
        let response = try #require(recorder.responses.withLock { $0.first })
        #expect(response.id == "water" && response.action == .custom("done") && response.text == "watered")
        #expect(try response.decodeUserInfo(Plant.self) == Plant(plant: "fern"))
        // Answered, it left the delivered list: a second answer finds nothing to answer.
        #expect(try await app.deliveredNotifications().presentations.isEmpty)
        do {
            try await device.call("io.coalesced.Notifications.Respond", ["app": .string(Self.notes), "id": "water", "action": "dismiss"])
            Issue.record("a notification was answered twice")
        } catch let error as VarlinkError {
            #expect(CoalescedError(error) == .unknownNotification(app: Self.notes, id: "water"))
        }

        // Badge and delivered list.
        try await app.setBadge(3)
        #expect(try await device.getApp()?["badge"] == 3)
        #expect(try await app.removeDeliveredNotifications(ids: ["other"]) == 0)
        #expect(try await app.removeDeliveredNotifications(ids: ["water"]) == 0)
        #expect(try await app.deliveredNotifications().presentations.isEmpty)
        try await app.setBadge(0)
        #expect(try await device.getApp()?["badge"] == 0)

        loop.cancel()
        try await onThread { _ = try waitForApp(device.client, Self.notes, "state", "notRunning") }
        _ = await loop.result
    }

    /// The stream's notification events become their deliveries; a payload the library does not read (a queue's
    /// overflow marker has none) comes as the event it is, so that nothing is lost.
    @Test func notificationEventsOnTheStreamBecomeTypedDeliveries() throws {
        let app = CoalescedApp(AppDeclaration(name: Self.notes), socketPath: "/nonexistent/io.coalesced")
        func delivery(_ text: String) throws -> Delivery? {
            try Received(try JSONParser.parse(text), state: .active, app: app).delivery
        }
        let presented = try delivery(
            #"{"seq": 4, "kind": "notification.willPresent", "count": 1, "payload": {"app": "org.example.notes", "#
                + #""id": "tea", "serial": 2, "content": {"title": "Tea", "subtitle": "", "body": "", "actions": "#
                + #"[{"id": "drink", "title": "Drink", "foreground": true}], "userInfo": {"pot": 2}}, "style": "alert", "#
                + #""date": 1800000000.5, "count": 3, "late": true}}"#
        )
        let content = NotificationContent(
            title: "Tea", actions: [NotificationAction(id: "drink", title: "Drink", foreground: true)], userInfoJSON: #"{"pot":2}"#
        )
        #expect(
            presented == .willPresent(
                NotificationPresentation(
                    app: Self.notes, id: "tea", serial: 2, content: content, style: .alert,
                    date: Date(timeIntervalSince1970: 1_800_000_000.5), count: 3, late: true
                )
            )
        )
        let answered = try delivery(
            #"{"seq": 5, "kind": "notification.didReceiveResponse", "payload": {"id": "tea", "action": "default", "userInfo": {}}}"#
        )
        #expect(answered == .didReceiveResponse(NotificationResponse(id: "tea", action: .default)))
        guard case .event(let marker)? = try delivery(#"{"seq": 6, "kind": "notification.willPresent", "count": 0, "dropped": 3}"#) else {
            Issue.record("an overflow marker did not come as an event")
            return
        }
        #expect(marker.kind == "notification.willPresent" && marker.dropped == 3 && marker.payloadJSON == nil)
        #expect(NotificationResponse.Action("snooze") == .custom("snooze") && NotificationResponse.Action("dismiss") == .dismiss)
    }

    @Test func pendingRequestsTheirDatesAndTheErrorsAreTyped() async throws {
        let device = try await Device(configuration: "[Notifications]\nPendingLimit=2\n")
        let app = device.app()
        try await app.register()
        let content = NotificationContent(title: "Standup")

        // A calendar trigger in a named zone: the next 08:30:00 UTC, within a day.
        let daily = NotificationRequest(
            id: "standup",
            trigger: .calendar(NotificationCalendar(hour: 8, minute: 30, timeZone: "UTC"), repeats: true),
            content: content,
            late: .dropAfter(.seconds(600))
        )
        let now = Date()
        let next = try await app.schedule(daily)
        #expect(next > now && next <= now.addingTimeInterval(86_400))
        #expect(next.timeIntervalSince1970.truncatingRemainder(dividingBy: 86_400) == 8 * 3600 + 30 * 60)
        let soon = NotificationRequest(id: "soon", trigger: .at(now.addingTimeInterval(600)), content: content, late: .deliver)
        try await app.schedule(soon)

        // Soonest first, each with its next date; the calendar spelled as systemd writes it.
        let pending = try await app.pendingNotifications()
        #expect(pending.map(\.request.id) == (next < now.addingTimeInterval(600) ? ["standup", "soon"] : ["soon", "standup"]))
        let standup = try #require(pending.first { $0.request.id == "standup" })
        #expect(standup.request == daily && abs(standup.next.timeIntervalSince(next)) < 0.001 && standup.lastFire == nil)
        #expect(standup.calendar == "*-*-* 08:30:00 UTC")
        let later = try #require(pending.first { $0.request.id == "soon" })
        #expect(abs(later.next.timeIntervalSince(now.addingTimeInterval(600))) < 0.001 && later.request.late == .deliver)

        // A third is past PendingLimit=2; replacing a pending one is not.
        await #expect(throws: CoalescedError.pendingLimit(app: Self.notes, limit: 2, pending: 2)) {
            try await app.schedule(NotificationRequest(id: "third", content: content))
        }
        try await app.schedule(NotificationRequest(id: "soon", trigger: .after(seconds: 900), content: content))

        // Requests that are not requests say why.
        do throws(CoalescedError) {
            try await app.schedule(
                NotificationRequest(id: "mars", trigger: .calendar(NotificationCalendar(hour: 8, timeZone: "Mars/Olympus_Mons")), content: content)
            )
            Issue.record("a request in an unknown zone was scheduled")
        } catch {
            guard case .invalidRequest(let name, let id, let reason) = error else { throw error }
            #expect(name == Self.notes && id == "mars" && reason.contains("Mars/Olympus_Mons"))
        }
        await #expect(throws: CoalescedError.self) {
            var bad = content
            bad.userInfoJSON = "[1]"
            try await app.schedule(NotificationRequest(id: "bad", content: bad))
        }
        do {
            try await device.call("io.coalesced.Notifications.Respond", ["app": .string(Self.notes), "id": "nothing", "action": "default"])
            Issue.record("a response to nothing was taken")
        } catch let error as VarlinkError {
            #expect(CoalescedError(error) == .unknownNotification(app: Self.notes, id: "nothing"))
        }
        let stranger = CoalescedApp(AppDeclaration(name: "org.example.stranger"), socketPath: device.daemon.socketPath)
        await #expect(throws: CoalescedError.unknownApp(app: "org.example.stranger")) { try await stranger.pendingNotifications() }

        #expect(try await app.cancelNotifications(ids: ["soon", "absent"]) == 1)
        #expect(try await app.pendingNotifications().map(\.request.id) == ["standup"])
        #expect(try await app.cancelAllNotifications() == 1)
        #expect(try await app.pendingNotifications().isEmpty)
    }
}
