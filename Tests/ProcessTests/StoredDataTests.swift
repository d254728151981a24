import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// What the store keeps across a restart of the real daemon: what an app holds of the daemon's own kinds, and what a
/// start cannot read back, which is set aside for the operator rather than keeping the daemon from starting.
@Suite struct StoredDataTests {
    static let app = "org.example.x"
    static let other = "org.example.notes"

    /// The callbacks `stream` receives until one of `kind`, acknowledging each; at most `limit` of them.
    static func receive(_ kind: String, on stream: VarlinkClient, acknowledging client: VarlinkClient, app: String, limit: Int = 10) throws -> JSONValue? {
        for _ in 0..<limit {
            let callback = try stream.receiveReply().parameters["callback"] ?? .null
            if let seq = callback["seq"] { _ = try client.call("io.coalesced.App.Ack", ["app": .string(app), "seq": seq]) }
            if callback["kind"]?.stringValue == kind { return callback }
        }
        return nil
    }

    /// A response to a notification of an app that is not running is held for it (`notification.didReceiveResponse`,
    /// the daemon's own kind): the daemon starts again after kill -9 and the app receives it when it runs.
    @Test func aResponseHeldForAnAppThatIsNotRunningSurvivesARestart() async throws {
        var daemon = try await onThread { () throws -> DaemonProcess in
            let daemon = try DaemonProcess(configuration: noDeadlines)
            try daemon.waitUntilReady()
            return daemon
        }
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            _ = try client.call(
                "io.coalesced.Notifications.Schedule", ["app": .string(Self.app), "request": ["id": "n", "content": ["title": "hi"]]]
            )
            try waitUntil("the notification to be delivered") {
                try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(Self.app)])["delivered"]?.arrayValue?.count == 1
            }
            _ = try client.call("io.coalesced.Notifications.Respond", ["app": .string(Self.app), "id": "n", "action": "dismiss"])
        }
        for signal in [SIGKILL, SIGTERM] {
            daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(endingWith: signal) }
        }
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            let stream = try attachedFromThisProcess(daemon.socketPath, app: Self.app)
            let response = try Self.receive("notification.didReceiveResponse", on: stream, acknowledging: client, app: Self.app)
            #expect(response?["payload"]?["id"] == "n" && response?["payload"]?["action"] == "dismiss")
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["setAside"] == [])
        }
        daemon.signal(SIGKILL)
    }

    /// A held row no daemon can read (a damaged or hand-edited store): the daemon starts, the app's held data is
    /// moved aside (kept, in the journal, in Stats and `coalescectl status`), and the other apps keep theirs.
    @Test func aRowThatCannotBeReadIsSetAsideAndTheDaemonStarts() async throws {
        var daemon = try await onThread { () throws -> DaemonProcess in
            let daemon = try DaemonProcess(configuration: noDeadlines)
            try daemon.waitUntilReady()
            return daemon
        }
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            for app in [Self.app, Self.other] {
                _ = try client.call("io.coalesced.App.Register", ["name": .string(app)])
                _ = try client.call("io.coalesced.App.Post", ["target": .string(app), "kind": "mail.received", "payload": ["n": 1]])
            }
        }
        // Stopped cleanly, its store damaged in one row, and started.
        daemon.signal(SIGTERM)
        let stopped = daemon
        #expect(try await onThread { stopped.waitForExit() } == 0)
        try await onThread {
            try editStore(
                stopped.stateDirectory + "/coalesced.db", "INSERT INTO held (app, kind, position, slot) VALUES (?, 'Not A Kind', 9, '{}')",
                [Self.app]
            )
        }
        daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(endingWith: SIGTERM) }
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            let setAside = try waitUntil("the app's held data to be set aside") { () throws -> [JSONValue]? in
                let list = try client.call("io.coalesced.System.Stats")["stats"]?["setAside"]?.arrayValue ?? []
                return list.isEmpty ? nil : list
            }
            #expect(setAside.count == 1)
            #expect(setAside.first?["app"] == .string(Self.app) && setAside.first?["rows"] == 2)
            #expect(setAside.first?["reason"] == "what it holds of Not A Kind cannot be read")
            #expect(daemon.output.contains("What \(Self.app) holds cannot be read"))
            let status = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "status"])
            #expect(status.stdout.contains("Set aside") && status.stdout.contains("\(Self.app): 2 rows"), "\(status.stdout)")
            // The other app keeps what it holds; the app set aside holds nothing and takes new posts.
            let queue = { (app: String) throws -> [JSONValue] in
                try client.call("io.coalesced.System.GetQueue", ["app": .string(app)])["held"]?.arrayValue ?? []
            }
            #expect(try queue(Self.other).map { $0["kind"] } == ["mail.received"])
            #expect(try queue(Self.app).isEmpty)
        }
        daemon.signal(SIGKILL)
    }

    /// The error a call was refused with: its name, and its reason when it gives one.
    static func refusal(_ body: () throws -> JSONObject) -> (name: String, reason: String?)? {
        do {
            _ = try body()
            return nil
        } catch let error as VarlinkError {
            return (error.varlinkName, error.varlinkParameters["reason"]?.stringValue)
        } catch {
            return ("\(error)", nil)
        }
    }

    /// An id with a NUL would be kept cut at the NUL (SQLite binds text up to it), so that a request scheduled under
    /// one id is listed, cancelled and restored under another: such ids, and control characters in every string kept
    /// as a key or a name, are refused with the reason, and what was accepted stays whole across a restart.
    @Test func controlCharactersInIdsAndNamesAreRefusedAndNothingAcceptedIsCut() async throws {
        var daemon = try await onThread { () throws -> DaemonProcess in
            let daemon = try DaemonProcess(configuration: noDeadlines)
            try daemon.waitUntilReady()
            return daemon
        }
        let app = JSONValue.string(Self.app)
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": app])
            func schedule(_ id: String) throws -> JSONObject {
                try client.call(
                    "io.coalesced.Notifications.Schedule",
                    ["app": app, "request": ["id": .string(id), "trigger": ["after": 3600], "content": ["title": "t"]]]
                )
            }
            _ = try schedule("k")
            let nul = Self.refusal { try schedule("k\u{0}a") }
            #expect(nul?.name == "io.coalesced.Notifications.InvalidRequest")
            #expect(nul?.reason == "the id contains the control character U+0000 (NUL); ids and names take none")
            let lineFeed = Self.refusal { try schedule("k\na") }
            #expect(lineFeed?.reason?.contains("U+000A (line feed)") == true)
            let cancel = Self.refusal { try client.call("io.coalesced.Notifications.Cancel", ["app": app, "ids": ["k\u{0}a"]]) }
            #expect(cancel?.name == "io.coalesced.Notifications.InvalidRequest" && cancel?.reason?.contains("NUL") == true)
            let respond = Self.refusal {
                try client.call("io.coalesced.Notifications.Respond", ["app": app, "id": "k\u{0}a", "action": "dismiss"])
            }
            #expect(respond?.name == "io.coalesced.Notifications.InvalidRequest")
            let title = Self.refusal {
                try client.call(
                    "io.coalesced.Notifications.Schedule", ["app": app, "request": ["id": "t", "content": ["title": "a\u{0}b"]]]
                )
            }
            #expect(title?.reason == "title contains U+0000 (NUL), which no text the daemon keeps or shows may hold")
            // The app's other strings kept in the store: its saved state, its background modes, a sum's member.
            let state = Self.refusal { try client.call("io.coalesced.App.SaveState", ["app": app, "data": "a\u{0}b"]) }
            #expect(state?.name == "org.varlink.service.InvalidParameter")
            let mode = Self.refusal { try client.call("io.coalesced.App.Register", ["name": app, "backgroundModes": ["audio\nfetch"]]) }
            #expect(mode?.name == "io.coalesced.App.InvalidBackgroundMode" && mode?.reason?.contains("U+000A") == true)
            let field = Self.refusal {
                try client.call("io.coalesced.App.Register", ["name": app, "kinds": ["mail.unread": ["policy": "sum", "field": "n\u{0}"]]])
            }
            #expect(field?.reason?.contains("U+0000 (NUL)") == true, "a sum's member with a NUL is refused: \(String(describing: field))")
            let listed = try client.call("io.coalesced.Notifications.ListPending", ["app": app])["pending"]?.arrayValue ?? []
            #expect(listed.map { $0["request"]?["id"] } == ["k"])
        }
        daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(endingWith: SIGKILL) }
        try await onThread { [daemon] in
            let client = try testClient(daemon.socketPath)
            let pending = try client.call("io.coalesced.Notifications.ListPending", ["app": app])["pending"]?.arrayValue ?? []
            #expect(pending.map { $0["request"]?["id"] } == ["k"], "the request accepted is kept whole across the restart")
        }
        daemon.signal(SIGKILL)
    }
}
