import CoalesceTestSupport
import Foundation
import Synchronization
import Testing
import Varlink

/// Events end to end, through the real binary and socket: the Swift client library declaring and acknowledging
/// over the wire, a producer that stops reading its replies slowed down by the socket, `coalescectl post` and
/// `queue`, posters told apart by their processes' credentials, held and unacknowledged events surviving `kill -9`,
/// and what reaches the database file. How the manager decides (each policy, holding and waking, topics, refusals,
/// pipelined and concurrent posts, restarts taken up from the store) runs in process: `InProcessEventTests`,
/// `InProcessPostTests`, `InProcessTopicTests` and `InProcessEventRestartTests`.
@Suite struct EventTests {
    static let mail = "org.example.mail"

    /// The app, registered and started on `daemon`, sent a post of `kind` at once, which it receives as `event` and
    /// acknowledges; returns it with the client that posted.
    func appThatAcknowledged(
        _ daemon: DaemonProcess,
        _ kind: String,
        _ payload: JSONValue,
        _ event: String
    ) throws -> (client: VarlinkClient, app: ExampleApp) {
        let client = try testClient(daemon.socketPath)
        let app = try self.suspendedApp(daemon, client)
        #expect(try post(client, Self.mail, kind, payload) == true)
        #expect(try app.events(atLeast: 1) == [event])
        try waitForAcknowledged(client, Self.mail)
        return (client, app)
    }

    /// Starts the app again (after the daemon or the app died) and checks that it is launched into the foreground.
    func relaunched(_ socket: String, arguments: [String] = []) throws -> ExampleApp {
        let app = try ExampleApp(socket: socket, name: Self.mail, arguments: arguments)
        #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        return app
    }

    /// Registers the app with a policy for each kind, starts it, and sends it home until suspended.
    func suspendedApp(_ daemon: DaemonProcess, _ client: VarlinkClient) throws -> ExampleApp {
        _ = try client.call(
            "io.coalesced.App.Register",
            [
                "name": .string(Self.mail),
                "kinds": [
                    "mail.received": ["policy": "latest"], "mail.first": ["policy": "first"],
                    "log.error": ["policy": "count"], "badge": ["policy": "sum", "field": "unread"],
                    "weather": ["policy": "merge"], "temperature": ["policy": "netChange"],
                    "chat.message": ["policy": "queue", "bound": 2],
                ],
            ]
        )
        let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
        #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        return app
    }

    /// The Swift client library declares kinds and topics at registration (the example app passes them through),
    /// and acknowledges a wake's burst of events with one Ack, not one each.
    @Test func theClientLibraryDeclaresKindsAndTopicsAndAcknowledgesAWakeOnce() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            let app = try ExampleApp(
                socket: daemon.socketPath, name: Self.mail,
                arguments: ["--kind", "log.error=count", "--kind", "badge=sum:unread", "--kind", "chat=queue:2", "--topic", "news"]
            )
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            #expect(try post(client, "topic:news", "headline", ["text": "hello"]) == true, "subscribed to news")
            #expect(try app.events(atLeast: 1) == [#"event headline count=1 payload={"text":"hello"}"#])

            _ = try client.call("io.coalesced.System.Deactivate")
            #expect(try app.nextCallbacks(2) == ["willResignActive", "didEnterBackground"])
            try waitForApp(client, Self.mail, "state", "suspended")
            for line in ["a", "b", "c"] { _ = try post(client, Self.mail, "log.error", ["line": .string(line)]) }
            for unread in [2, 3] { _ = try post(client, Self.mail, "badge", ["unread": .int(Int64(unread))]) }
            for text in ["one", "two", "three"] { _ = try post(client, Self.mail, "chat", ["text": .string(text)]) }

            func stats() throws -> (calls: Int64, unacknowledged: Int64) {
                let stats = try client.call("io.coalesced.System.Stats")["stats"]
                return (stats?["calls"]?.intValue ?? -1, stats?["events"]?["unacknowledged"]?.intValue ?? -1)
            }
            let before = try stats().calls
            _ = try client.call("io.coalesced.System.Activate", ["app": .string(Self.mail)])
            #expect(try app.nextCallbacks(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(
                Array(try app.events(atLeast: 6).dropFirst()) == [
                    #"event log.error count=3 payload=-"#, #"event badge count=2 payload={"unread":5}"#,
                    #"event chat count=1 payload={"text":"two"}"#, #"event chat count=1 payload={"text":"three"}"#,
                    #"event chat count=1 payload=- dropped=1"#,
                ],
                "each kind held by the policy the library declared"
            )
            var statsCalls: Int64 = 0
            var now = (calls: Int64(-1), unacknowledged: Int64(-1))
            try waitUntil("the app to acknowledge its events (\(now.unacknowledged) unacknowledged)") {
                statsCalls += 1
                now = try stats()
                return now.unacknowledged == 0
            }
            // Between the two Stats calls: Activate, the polls, the Acks of the two lifecycle callbacks, the last
            // Stats itself, and the events' Acks.
            let polls = statsCalls - 1
            let eventAcks = now.calls - before - 1 - polls - 2 - 1
            // The library acknowledges what one read of its stream brought: the five events come in one read, or,
            // when the machine is busy, in two; never one Ack each.
            #expect((1...2).contains(eventAcks), "five events, one Ack per read of the stream: \(eventAcks)")
        }
        daemon.signal(SIGKILL)
    }

    /// A producer that writes posts without reading its replies is slowed down: once the replies it owes pile up
    /// unread, the daemon stops reading from it, so its writes block rather than the daemon's memory growing; when
    /// it reads again, every post is answered and held.
    @Test func aProducerThatDoesNotReadItsRepliesIsSlowedDownAndLosesNothing() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            var frame: [UInt8] = []
            VarlinkCall(
                method: "io.coalesced.App.Post",
                parameters: ["target": .string(Self.mail), "kind": "tick", "payload": ["text": .string(String(repeating: "x", count: 100))]]
            ).message.write(to: &frame)
            frame.append(0)
            let posts = 100_000
            let total = frame.count * posts  // about 18 MB
            var chunk: [UInt8] = []
            for _ in 0..<64 { chunk += frame }
            let flood = try testClient(daemon.socketPath)
            let fd = flood.descriptor
            let residentBefore = daemon.residentKiB ?? 0
            var sent = 0
            var replies = 0
            var failed = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            /// Writes what the socket takes now, from where the stream of identical frames stands.
            func write() {
                let start = sent % frame.count
                let length = min(chunk.count - start, total - sent)
                let count = chunk.withUnsafeBytes { send(fd, $0.baseAddress! + start, length, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                if count > 0 { sent += count }
            }
            /// Waits until the socket takes more or has replies to read (as `events` asks), at most `milliseconds`.
            func waitForSocket(_ events: Int32, milliseconds: Int32) {
                var poller = pollfd(fd: fd, events: Int16(events), revents: 0)
                _ = poll(&poller, 1, milliseconds)
            }
            // Two seconds of writing and no reading: the time the daemon has to take what it would.
            let deadline = ContinuousClock.now + .seconds(2)
            while ContinuousClock.now < deadline, sent < total {
                let before = sent
                write()
                if sent == before { waitForSocket(Int32(POLLOUT), milliseconds: 10) }
            }
            #expect(sent < total / 4, "the daemon stopped reading: \(sent) of \(total) bytes taken")
            let grown = (daemon.residentKiB ?? 0) - residentBefore
            #expect(grown < 64 * 1024, "the daemon grew by \(grown) KiB")
            // Now read the replies as they come, and write the rest.
            try waitUntil("replies to all \(posts) posts (\(replies) so far)", timeout: .seconds(120), poll: .zero) {
                if sent < total { write() }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 {
                    let read = buffer[..<count]
                    replies += read.filter { $0 == 0 }.count
                    if String(decoding: read, as: UTF8.self).contains(#""error""#) { failed += 1 }
                } else {
                    waitForSocket(Int32(POLLIN) | (sent < total ? Int32(POLLOUT) : 0), milliseconds: 100)
                }
                return replies >= posts
            }
            #expect(failed == 0)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.mail)])["held"]?.arrayValue?.first
            #expect(held?["kind"] == "tick" && held?["count"] == .int(Int64(posts)), "every post held: \(held ?? .null)")
        }
        daemon.signal(SIGKILL)
    }

    /// The events `app` (active, or running with a background mode) received before a marker posted now: once the
    /// marker has come, whatever the daemon would have sent the app before it has come too.
    func eventsBeforeAMarker(_ app: ExampleApp, _ client: VarlinkClient) throws -> [String] {
        #expect(try post(client, Self.mail, "test.marker", ["marker": true]) == true, "the marker is sent at once")
        return try app.events(before: #"event test.marker count=1 payload={"marker":true}"#)
    }

    @Test func coalescectlPostsAndShowsWhatIsHeld() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread {
            let ctl = BuildProducts.path(of: "coalescectl")
            _ = try testClient(socket).call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            #expect(try runProcess(ctl, ["post", Self.mail, "badge", #"{"n":2}"#, "--policy", "sum:n", "--socket", socket]).stdout == "held\n")
            #expect(try runProcess(ctl, ["post", Self.mail, "badge", #"{"n":5}"#, "--socket", socket]).stdout == "held\n")
            #expect(try runProcess(ctl, ["post", Self.mail, "mail.received", "--socket", socket]).stdout == "held\n")
            let bad = try runProcess(ctl, ["post", Self.mail, "badge", "{nope", "--socket", socket])
            #expect(bad.status == 64 && bad.stderr.contains("the payload is not JSON"), "\(bad.stderr)")
            let queue = try runProcess(ctl, ["queue", Self.mail, "--socket", socket]).stdout.split(separator: "\n")
            #expect(queue.first?.split(separator: " ", omittingEmptySubsequences: true) == ["KIND", "POLICY", "COUNT", "FIRST", "LAST"])
            #expect(queue[1].split(separator: " ", omittingEmptySubsequences: true).prefix(3) == ["badge", "sum:n", "2"])
            #expect(queue[2].split(separator: " ", omittingEmptySubsequences: true).prefix(3) == ["mail.received", "latest", "1"])
            #expect(queue.last == "2 kinds held; 0 sent and not acknowledged.")
            let status = try runProcess(ctl, ["status", "--socket", socket]).stdout
            #expect(status.contains("Events: 0 posts sent at once, 3 held; 2 kinds held now, 0 unacknowledged"), "\(status)")
        }
        daemon.signal(SIGKILL)
    }

    /// Who posts is the kernel's word on the connection (SO_PEERCRED, SO_PEERGROUPS): another user's process,
    /// under `setpriv`, may not post until the app names its uid, or a group it runs with. Every refusal's name and
    /// parameters, and the posters' rules, are tested in process (`InProcessPostTests`).
    @Test func anotherUsersProcessPostsByItsCredentialsOnTheSocket() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let socket = daemon.socketPath
        try await onThread { _ = try testClient(socket).call("io.coalesced.App.Register", ["name": .string(Self.mail)]) }
        // Another user may not post unless the app says so.
        let copy = try await onThread { try executableCopy(of: "coalescectl", in: daemon.directory) }
        let postCall = #"{"target":"org.example.mail","kind":"a","payload":{}}"#
        let refused = try await onThread {
            try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", daemon.socketPath, "call", "io.coalesced.App.Post", postCall])
        }
        #expect(refused.status == 1 && refused.stderr.contains(#"io.coalesced.App.NotAllowedToPost {"target":"org.example.mail"}"#), "\(refused.stderr)")
        try await onThread { _ = try testClient(socket).call("io.coalesced.App.Register", ["name": .string(Self.mail), "posters": ["uids": [65534]]]) }
        let allowed = try await onThread {
            try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", daemon.socketPath, "call", "io.coalesced.App.Post", postCall])
        }
        #expect(allowed.status == 0, "\(allowed.stderr)")

        // A group: what counts is the posting process's own supplementary groups (nobody's user database entry has
        // none), so nobody may post while it runs with "users" among its groups, and not without.
        try await onThread {
            _ = try testClient(socket).call("io.coalesced.App.Register", ["name": .string(Self.mail), "posters": ["uids": [], "groups": ["users"]]])
        }
        let withGroup = try await onThread {
            try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--groups=users", copy, "--socket", daemon.socketPath, "call", "io.coalesced.App.Post", postCall])
        }
        #expect(withGroup.status == 0, "\(withGroup.stderr)")
        let withoutGroup = try await onThread {
            try runProcess("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", daemon.socketPath, "call", "io.coalesced.App.Post", postCall])
        }
        #expect(withoutGroup.stderr.contains("NotAllowedToPost"), "\(withoutGroup.stderr)")
        daemon.signal(SIGKILL)
    }
}

