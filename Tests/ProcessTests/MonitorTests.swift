import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Monitors through the real socket: the Monitor call's own checks of its parameters, `coalescectl monitor` and
/// `coalescectl app`. What monitors see (traffic, filters, a monitor that stops reading) is tested in process
/// (`CoalesceServerTests`: `InProcessMonitorTests`).
@Suite struct MonitorTests {
    static let mail = "org.example.mail"
    static let other = "org.example.other"

    func register(_ client: VarlinkClient) throws {
        let kinds: JSONValue = ["mail.received": ["policy": "latest"], "badge": ["policy": "sum", "field": "unread"]]
        for name in [Self.mail, Self.other] {
            _ = try client.call("io.coalesced.App.Register", ["name": .string(name), "kinds": kinds])
        }
    }

    @Test func aMonitorRefusesWhatItCannotWatch() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            for (parameters, parameter) in [
                (["watch": ["posts", "everything"]] as JSONObject, "watch[1]"), (["apps": ["Mail"]], "apps[0]"),
                (["kinds": ["lifecycle.x"]], "kinds[0]"), (["watch": "posts"], "watch"),
            ] {
                try client.send(VarlinkCall(method: "io.coalesced.System.Monitor", parameters: parameters, more: true))
                let reply = try client.receiveReply()
                #expect(reply.error == "org.varlink.service.InvalidParameter", "\(parameters): \(reply)")
                #expect(reply.parameters["parameter"] == .string(parameter), "\(parameters): \(reply)")
            }
        }
    }

    @Test func coalescectlMonitorPrintsTrafficAsLinesAndAsJSON() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            try self.register(client)
            let ctl = BuildProducts.path(of: "coalescectl")
            let json = try WatchedProcess(ctl, ["monitor", "--traffic", "--app", Self.mail, "--json", "--socket", socket])
            let text = try WatchedProcess(ctl, ["monitor", "--traffic", "--app", Self.mail, "--kind", "badge", "--socket", socket])
            try text.waitForLine(
                "Monitoring app transitions, posts, deliveries, acknowledgements and attachments; press Ctrl-C to stop."
            )
            // The JSON monitor says nothing before its first record: post until it prints one (held, the app not
            // running; of a kind the other monitor leaves out).
            try waitUntil("the JSON monitor in place", poll: .milliseconds(50)) {
                _ = try post(client, Self.mail, "mail.received", ["id": 0])
                return json.output.contains { $0.hasPrefix(#"{"post":"#) }
            }
            #expect(try post(client, Self.other, "badge", ["unread": 1]) == false)
            let app = try ExampleApp(socket: socket, name: Self.mail)
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(try post(client, Self.mail, "badge", ["unread": 4]) == true)
            let events = try app.events(atLeast: 2)
            let seq = try #require(events.firstIndex { $0.hasPrefix("event badge") }.map { app.eventSequences[$0] }, "\(events)")
            try json.waitForLine(containing: #""count":1,"kind":"badge""#)
            let delivery = try text.waitForLine(containing: "delivery badge")
            app.kill()
            try json.waitForLine(#"{"detach":"#)

            let records = try json.output.map { try JSONParser.parse($0) }
            #expect(records.allSatisfy { $0.objectValue?.count == 1 }, "one record a line: \(json.output)")
            let names = records.compactMap { $0.objectValue.flatMap { Array($0).first?.key } }
            #expect(names.contains("attach") && names.contains("detach"), "\(names)")
            let posted = records.first { $0["post"]?["kind"] == "badge" }?["post"]
            #expect(posted?["delivered"] == true && posted?["seq"] == .int(seq), "\(json.output)")
            #expect(!json.output.contains { $0.contains(Self.other) })

            #expect(delivery.hasSuffix("org.example.mail: delivery badge seq \(seq)"), "\(delivery)")
            let lines = text.output.dropFirst().map { $0.split(separator: " ").dropFirst(3).joined(separator: " ") }
            #expect(
                lines == [
                    "org.example.mail: post badge from uid \(getuid()): delivered as seq \(seq)",
                    "org.example.mail: delivery badge seq \(seq)",
                ],
                "\(text.output)"
            )
        }
    }

    @Test func coalescectlAppShowsTheDeclaredKindsPostersAndTopics() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            _ = try client.call(
                "io.coalesced.App.Register",
                [
                    "name": .string(Self.mail),
                    "backgroundModes": ["fetch"],
                    "kinds": [
                        "mail.received": ["policy": "latest"], "badge": ["policy": "sum", "field": "unread", "volatile": true],
                        "mail.sync": ["policy": "queue", "bound": 5, "backgroundMode": "fetch"],
                    ],
                    "posters": ["uids": [65534]],
                    "topics": ["news", "weather"],
                ]
            )
            let reply = try client.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]
            #expect(reply?["kinds"]?["badge"] == ["policy": "sum", "field": "unread", "volatile": true])
            #expect(reply?["posters"] == ["anyone": false, "uids": [65534], "groups": []])
            #expect(reply?["topics"] == ["news", "weather"])

            let shown = try runProcess(BuildProducts.path(of: "coalescectl"), ["app", Self.mail, "--socket", socket]).stdout
            let lines = shown.split(separator: "\n").map { String($0) }
            let kinds = lines.firstIndex { $0.hasSuffix("Kinds: badge: sum:unread, volatile") }
            #expect(kinds != nil, "\(shown)")
            if let kinds {
                #expect(lines[kinds + 1].trimmingCharacters(in: .whitespaces) == "mail.received: latest", "\(shown)")
                #expect(lines[kinds + 2].trimmingCharacters(in: .whitespaces) == "mail.sync: queue:5, launches it into fetch", "\(shown)")
            }
            #expect(lines.contains { $0.hasSuffix("Posters: its user and root; uid 65534") }, "\(shown)")
            #expect(lines.contains { $0.hasSuffix("Topics: news, weather") }, "\(shown)")
        }
    }
}
