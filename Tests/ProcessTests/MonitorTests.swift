import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Monitors watching traffic through the real socket: posts held and sent, deliveries, acknowledgements, attaches and
/// detaches, filtered by app and by kind; `coalescectl monitor` and `coalescectl app`.
@Suite struct MonitorTests {
    static let mail = "org.example.mail"
    static let other = "org.example.other"

    /// A Monitor call on a connection of its own; the records it was sent are read on demand, in order, as
    /// `(name, record)`: `("post", {...})`.
    final class Watch: @unchecked Sendable {
        let client: VarlinkClient
        private(set) var records: [(name: String, record: JSONValue)] = []

        init(_ socket: String, _ parameters: JSONObject) throws {
            self.client = try testClient(socket, timeout: .seconds(20))
            try self.client.send(VarlinkCall(method: "io.coalesced.System.Monitor", parameters: parameters, more: true))
            let first = try self.client.receiveReply()
            guard first.continues, first.error == nil, first.parameters.allSatisfy({ $0.value == .null }) else {
                throw SupportError("the monitor did not start: \(first)")
            }
        }

        /// Reads replies until `condition` holds of the records read so far (each reply's wait is bounded by the
        /// client's 20 s receive timeout), and returns them.
        @discardableResult
        func read(until condition: ([(name: String, record: JSONValue)]) -> Bool) throws -> [(name: String, record: JSONValue)] {
            while !condition(self.records) {
                let reply = try self.client.receiveReply()
                guard reply.error == nil else { throw SupportError("the monitor ended: \(reply)") }
                let members = reply.parameters.filter { $0.value != .null }
                guard members.count == 1 else { throw SupportError("a reply with other than one record: \(reply)") }
                self.records.append((members[0].key, members[0].value))
            }
            return self.records
        }
    }

    /// A record without its time, as one line: `post {"app":…}`.
    static func line(_ entry: (name: String, record: JSONValue)) -> String {
        var record = entry.record.objectValue ?? [:]
        record["time"] = nil
        return "\(entry.name) \(JSONValue.object(record).jsonText)"
    }

    func register(_ client: VarlinkClient) throws {
        let kinds: JSONValue = ["mail.received": ["policy": "latest"], "badge": ["policy": "sum", "field": "unread"]]
        for name in [Self.mail, Self.other] {
            _ = try client.call("io.coalesced.App.Register", ["name": .string(name), "kinds": kinds])
        }
    }

    @Test func aMonitorSeesAnAppsTrafficAndNothingOfAnotherApp() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            try self.register(client)
            let uid = Int64(getuid())
            let watch = try Watch(daemon.socketPath, ["apps": [.string(Self.mail)], "watch": ["transitions", "traffic"]])
            let badges = try Watch(daemon.socketPath, ["kinds": ["badge"], "watch": ["traffic"]])
            // A client of before: no parameters, transitions only.
            let transitions = try Watch(daemon.socketPath, [:])

            let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
            let pid = Int64(app.child.pid)
            _ = try client.call("io.coalesced.System.Deactivate")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try waitForApp(client, Self.mail, "state", "suspended")

            #expect(try post(client, Self.mail, "mail.received", ["id": 1]) == false)
            #expect(try post(client, Self.mail, "badge", ["unread": 2]) == false)
            #expect(try post(client, Self.other, "badge", ["unread": 5]) == false)
            #expect(try post(client, Self.other, "mail.received", ["id": 9]) == false)
            _ = try client.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(try app.events(atLeast: 2).count == 2)
            try waitForAcknowledged(client, Self.mail)
            let sequences = app.eventSequences
            // Sent at once to the active app: delivered, with the number it went out with.
            #expect(try post(client, Self.mail, "mail.received", ["id": 3]) == true)
            _ = try app.events(atLeast: 3)
            let sent = app.eventSequences[2]
            app.kill()
            try waitForApp(client, Self.mail, "state", "notRunning")

            let records = try watch.read { $0.contains { $0.record["reason"] == "processExited" } }.map(Self.line)
            let mail = JSONValue.string(Self.mail)
            let expected = [
                ("attach", ["app": mail, "pid": .int(pid)]),
                ("post", ["target": mail, "app": mail, "kind": "mail.received", "delivered": false, "uid": .int(uid)]),
                ("post", ["target": mail, "app": mail, "kind": "badge", "delivered": false, "uid": .int(uid)]),
                ("delivery", ["app": mail, "kind": "mail.received", "seq": .int(sequences[0]), "count": 1]),
                ("delivery", ["app": mail, "kind": "badge", "seq": .int(sequences[1]), "count": 1]),
                ("acknowledgement", ["app": mail, "seq": .int(sequences[1])]),
                (
                    "post",
                    ["target": mail, "app": mail, "kind": "mail.received", "delivered": true, "seq": .int(sent), "uid": .int(uid)]
                ),
                ("delivery", ["app": mail, "kind": "mail.received", "seq": .int(sent), "count": 1]),
                // The stream closed: then the lifecycle hears that the process exited.
                ("detach", ["app": mail, "pid": .int(pid)]),
                ("transition", ["app": mail, "from": "active", "to": "notRunning", "reason": "processExited"]),
            ].map { (name: String, record: JSONObject) in Self.line((name, .object(record))) }
            // In this order; the lifecycle's transitions and acknowledgements of callbacks come in between.
            var rest = records[...]
            for line in expected {
                guard let found = rest.firstIndex(of: line) else {
                    Issue.record("no \(line) in order among:\n\(records.joined(separator: "\n"))")
                    break
                }
                rest = rest[(found + 1)...]
            }
            #expect(records.first == expected[0], "the attach comes first")
            #expect(!records.contains { $0.contains(Self.other) }, "nothing of another app: \(records)")

            // The kind filter: badge's posts and deliveries, of every app, and nothing without a kind.
            let badgeRecords = try badges.read { $0.count >= 3 }.map(Self.line)
            let other = JSONValue.string(Self.other)
            #expect(
                badgeRecords
                    == [
                        ("post", ["target": mail, "app": mail, "kind": "badge", "delivered": false, "uid": .int(uid)]),
                        ("post", ["target": other, "app": other, "kind": "badge", "delivered": false, "uid": .int(uid)]),
                        ("delivery", ["app": mail, "kind": "badge", "seq": .int(sequences[1]), "count": 1]),
                    ].map { (name: String, record: JSONObject) in Self.line((name, .object(record))) }
            )
            // The monitor without parameters got the transitions only: the last one is the process's end.
            let plain = try transitions.read { $0.contains { $0.record["reason"] == "processExited" } }.map(Self.line)
            #expect(plain == records.filter { $0.hasPrefix("transition ") }, "\(plain)")
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
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
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
                #expect(lines[kinds + 2].trimmingCharacters(in: .whitespaces) == "mail.sync: queue:5, wakes it into fetch", "\(shown)")
            }
            #expect(lines.contains { $0.hasSuffix("Posters: its user and root; uid 65534") }, "\(shown)")
            #expect(lines.contains { $0.hasSuffix("Topics: news, weather") }, "\(shown)")
        }
    }
}
