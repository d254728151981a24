import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Respond through the real daemon, as a hostile user would call it: a presentation is answered once and then
/// leaves the delivered list; a request never presented cannot be answered; a typed reply is bounded; an answer
/// over its owner's quota is refused as Schedule refuses one.
@Suite struct NotificationResponseTests {
    static let app = "org.example.reminders"

    static func respond(_ client: VarlinkClient, _ id: String, _ action: String, text: String? = nil) throws {
        var parameters: JSONObject = ["app": .string(Self.app), "id": .string(id), "action": .string(action)]
        if let text { parameters["text"] = .string(text) }
        _ = try client.call("io.coalesced.Notifications.Respond", parameters)
    }

    static func delivered(_ client: VarlinkClient) throws -> [JSONValue] {
        try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(Self.app)])["delivered"]?.arrayValue ?? []
    }

    /// Registers the app and has one notification, `id`, with a snooze button, presented and delivered.
    static func presented(_ client: VarlinkClient, _ id: String = "n") throws {
        _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
        _ = try client.call(
            "io.coalesced.Notifications.Schedule",
            [
                "app": .string(Self.app),
                "request": ["id": .string(id), "content": ["title": "t", "actions": [["id": "snooze", "title": "Snooze"]]]],
            ]
        )
        try waitUntil("the notification to be delivered") { try Self.delivered(client).contains { $0["id"] == .string(id) } }
    }

    static func unknownNotification(_ id: String) -> VarlinkError {
        VarlinkError(name: "io.coalesced.Notifications.UnknownNotification", parameters: ["app": .string(Self.app), "id": .string(id)])
    }

    @Test func aPresentationIsAnsweredOnceAndThenLeavesTheDeliveredList() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines)
        try await onThread {
            try daemon.waitUntilReady()
            let client = try testClient(daemon.socketPath)
            try Self.presented(client)
            // A refused answer (an action it does not offer) answers nothing.
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.UnknownAction", parameters: ["app": .string(Self.app), "id": "n", "action": "open"])) {
                try Self.respond(client, "n", "open")
            }
            try Self.respond(client, "n", "default", text: "in 5")
            #expect(try Self.delivered(client).isEmpty, "an answered notification leaves the delivered list")
            #expect(throws: Self.unknownNotification("n")) { try Self.respond(client, "n", "dismiss") }
            #expect(throws: Self.unknownNotification("n")) { try Self.respond(client, "n", "snooze") }
            // A request pending and never presented has nothing to answer, however often it repeats.
            _ = try client.call(
                "io.coalesced.Notifications.Schedule",
                [
                    "app": .string(Self.app),
                    "request": ["id": "daily", "trigger": ["calendar": ["hour": 8], "repeats": true], "content": ["title": "d"]],
                ]
            )
            #expect(throws: Self.unknownNotification("daily")) { try Self.respond(client, "daily", "default") }
            // The app, launched into the foreground for the answer, hears it.
            let stream = try testClient(daemon.socketPath)
            try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(Self.app)], more: true))
            var response: JSONValue?
            while response == nil {
                let callback = try stream.receiveReply().parameters["callback"] ?? .null
                guard callback != .null else { continue }
                _ = try client.call("io.coalesced.App.Ack", ["app": .string(Self.app), "seq": callback["seq"] ?? .null])
                if callback["kind"] == "notification.didReceiveResponse" { response = callback["payload"] }
            }
            #expect(response == ["id": "n", "action": "default", "text": "in 5", "userInfo": [:]])
            // Presented again, it is answered again.
            _ = try client.call(
                "io.coalesced.Notifications.Schedule", ["app": .string(Self.app), "request": ["id": "n", "content": ["title": "again"]]]
            )
            try waitUntil("the notification to be delivered again") { try Self.delivered(client).count == 1 }
            try Self.respond(client, "n", "dismiss")
            #expect(try Self.delivered(client).isEmpty)
        }
        daemon.signal(SIGKILL)
    }

    @Test func aResponsesTextIsBoundedAtFourKibibytes() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines)
        try await onThread {
            try daemon.waitUntilReady()
            let client = try testClient(daemon.socketPath)
            try Self.presented(client)
            let long = String(repeating: "ä", count: 2049)  // 4,098 bytes
            #expect(throws: VarlinkError.self) { try Self.respond(client, "n", "dismiss", text: long) }
            do {
                try Self.respond(client, "n", "dismiss", text: long)
            } catch let error as VarlinkError {
                #expect(error.varlinkName == "io.coalesced.Notifications.InvalidRequest")
                #expect(error.varlinkParameters["id"] == "n" && error.varlinkParameters["app"] == .string(Self.app))
                let reason = error.varlinkParameters["reason"]?.stringValue ?? ""
                #expect(reason.contains("4098 bytes") && reason.contains("4096"), "\(reason)")
            }
            #expect(try Self.delivered(client).count == 1, "a refused answer leaves the notification listed")
            try Self.respond(client, "n", "dismiss", text: String(repeating: "x", count: 4096))
            #expect(try Self.delivered(client).isEmpty)
        }
        daemon.signal(SIGKILL)
    }

    /// Posts 4 KiB payloads to a queue kind until the daemon refuses one; returns how many it took.
    static func fill(_ client: VarlinkClient, _ app: String, upTo most: Int = 1000) throws -> (taken: Int, refusal: VarlinkError?) {
        let payload: JSONValue = ["text": .string(String(repeating: "x", count: 4096))]
        for taken in 0..<most {
            do {
                try post(client, app, "chat", payload, policy: ["policy": "queue", "bound": 10000])
            } catch let error as VarlinkError {
                return (taken, error)
            }
        }
        return (most, nil)
    }

    @Test func anAnswerOverTheOwnersQuotaIsRefusedWithTheQuota() async throws {
        let daemon = try DaemonProcess(configuration: noDeadlines + "[Quotas]\nAdminHeldBytes=64K\n")
        try await onThread {
            try daemon.waitUntilReady()
            let client = try testClient(daemon.socketPath)
            try Self.presented(client)
            // The owner's quota filled with held events: 4 KiB ones, then small ones, until no more fit.
            #expect(try Self.fill(client, Self.app).refusal?.varlinkName == "io.coalesced.App.QuotaExceeded")
            var refusal: VarlinkError?
            for _ in 0..<100 where refusal == nil {
                do {
                    try post(client, Self.app, "chat", ["text": .string(String(repeating: "s", count: 64))], policy: ["policy": "queue", "bound": 10000])
                } catch let error as VarlinkError {
                    refusal = error
                }
            }
            #expect(refusal?.varlinkName == "io.coalesced.App.QuotaExceeded")
            #expect(throws: VarlinkError(name: "io.coalesced.Notifications.QuotaExceeded", parameters: ["quota": "AdminHeldBytes", "limit": 65536, "uid": 0])) {
                try Self.respond(client, "n", "snooze", text: String(repeating: "t", count: 1000))
            }
            #expect(try Self.delivered(client).map { $0["id"] } == ["n"], "nothing changed: the notification is still listed")
        }
        daemon.signal(SIGKILL)
    }
}
