@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Posts as `io.coalesced.App.Post` answers them, on the manager in process: each poster an ``AppClient``, the
/// daemon's App interface on a connection of its own with the credentials the test gives it, so that refusals are
/// read with their wire names and parameters, and pipelined posts with their answers in order. That the daemon
/// takes those credentials from the kernel (a real process under `setpriv`) is tested end to end, in `EventTests`.
@Suite struct InProcessPostTests {
    static let mail = "org.example.mail"

    /// The kinds held for mail, each with its count.
    func held(_ fixture: ManagerFixture) throws -> [String] {
        try fixture.manager.queue(of: Self.mail).held.map { "\($0.kind.value)×\($0.slot.count)" }
    }

    @Test func badPostsGetErrorsThatNameTheProblemAndChangeNothing() async throws {
        try await withManager(configuration: try configuration("[Events]\nMaxPayloadSize=64\nMaxKindsPerApp=2\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail, kinds: ["badge": ["policy": "sum", "field": "n"]])
            try await withAppClient(fixture) { client in
                let refusals: [(VarlinkError?, VarlinkError)] = [
                    (
                        await refusal { try await client.post("org.example.none", "mail", [:]) },
                        VarlinkError(name: "io.coalesced.App.UnknownTarget", parameters: ["target": "org.example.none"])
                    ),
                    (
                        await refusal { try await client.post(Self.mail, "Mail", [:]) },
                        VarlinkError(
                            name: "io.coalesced.App.InvalidKind",
                            parameters: ["kind": "Mail", "reason": "each label starts with a lower-case letter or digit"]
                        )
                    ),
                    (
                        await refusal { try await client.post(Self.mail, "lifecycle.x", [:]) },
                        VarlinkError(
                            name: "io.coalesced.App.InvalidKind",
                            parameters: ["kind": "lifecycle.x", "reason": "lifecycle.* kinds are the daemon's own"]
                        )
                    ),
                    (
                        await refusal { try await client.post(Self.mail, "mail", [1, 2]) },
                        VarlinkError.invalidParameter("payload", reason: "expected an object, got an array")
                    ),
                    (
                        // {"text":"x…x"}: 9 + 70 + 2 bytes.
                        await refusal {
                            try await client.post(Self.mail, "mail", ["text": .string(String(repeating: "x", count: 70))])
                        },
                        VarlinkError(name: "io.coalesced.App.PayloadTooLarge", parameters: ["size": 81, "limit": 64])
                    ),
                    (
                        await refusal { try await client.post(Self.mail, "mail", [:], policy: ["policy": "most"]) },
                        VarlinkError(
                            name: "io.coalesced.App.InvalidPolicy",
                            parameters: [
                                "kind": "mail",
                                "reason": "'most' is not a policy: latest, first, count, sum (with field), merge, netChange or queue (with bound)",
                            ]
                        )
                    ),
                    (
                        await refusal { try await client.post(Self.mail, "badge", ["n": "three"]) },
                        VarlinkError(
                            name: "io.coalesced.App.NotANumber",
                            parameters: ["target": "org.example.mail", "kind": "badge", "field": "n"]
                        )
                    ),
                ]
                for (refused, expected) in refusals {
                    #expect(refused == expected)
                }
                #expect(try self.held(fixture).isEmpty, "nothing refused was kept")

                let a = try await client.post(Self.mail, "a", [:])
                let b = try await client.post(Self.mail, "b", [:])
                #expect([a, b] == [["delivered": false, "recipients": 1], ["delivered": false, "recipients": 1]])
                let third = await refusal { try await client.post(Self.mail, "c", [:]) }
                #expect(
                    third
                        == VarlinkError(
                            name: "io.coalesced.App.TooManyKinds", parameters: ["target": "org.example.mail", "limit": 2]
                        )
                )
                let again = try await client.post(Self.mail, "a", [:])
                #expect(again["delivered"] == false, "a kind already held still folds")
                #expect(try self.held(fixture) == ["a×2", "b×1"])
            }
        }
    }

    /// Who may post: the app's owner and root; another user only when the app names its uid, or a group the poster
    /// is in (its supplementary groups as the kernel reports them on the connection, or its primary group).
    @Test func anotherUserPostsOnlyWhereTheAppLetsItsUidOrItsGroupsPost() async throws {
        let nobody: UInt32 = 65534
        let users = try #require(getgrnam("users")?.pointee.gr_gid)
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let refused = await refusal {
                _ = try await withAppClient(fixture, uid: nobody) { try await $0.post(Self.mail, "a", [:]) }
            }
            #expect(refused == VarlinkError(name: "io.coalesced.App.NotAllowedToPost", parameters: ["target": "org.example.mail"]))
            #expect(try self.held(fixture).isEmpty)

            try await fixture.register(Self.mail, posters: ["uids": [.int(Int64(nobody))]])
            let allowed = try await withAppClient(fixture, uid: nobody) { try await $0.post(Self.mail, "a", [:]) }
            #expect(allowed == ["delivered": false, "recipients": 1])

            try await fixture.register(Self.mail, posters: ["uids": [], "groups": ["users"]])
            let withGroup = try await withAppClient(fixture, uid: nobody, groups: [users]) {
                try await $0.post(Self.mail, "a", [:])
            }
            #expect(withGroup["delivered"] == false)
            let asPrimary = try await withAppClient(fixture, uid: nobody, gid: users) {
                try await $0.post(Self.mail, "a", [:])
            }
            #expect(asPrimary["delivered"] == false)
            let withoutGroup = await refusal {
                _ = try await withAppClient(fixture, uid: nobody) { try await $0.post(Self.mail, "a", [:]) }
            }
            #expect(withoutGroup?.varlinkName == "io.coalesced.App.NotAllowedToPost")
            #expect(try self.held(fixture) == ["a×3"])
        }
    }

    /// Posts that arrive together for one kind of a suspended app go to the store as one write; each is still
    /// answered on its own, in order, and one refused among them (a sum without its number) changes nothing.
    @Test func postsPipelinedToOneKindAreEachAnsweredAndFoldedInOrder() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail, kinds: ["badge": ["policy": "sum", "field": "unread"]])
            let app = try await fixture.attach(Self.mail)
            let launched = try await app.sent().callbacks
            #expect(launched == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: Self.mail)
            let home = try await app.sent().callbacks
            #expect(home == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)

            let payloads: [JSONValue] = [["unread": 1], ["unread": "two"], ["unread": 2], ["unread": 3], ["unread": 4]]
            let answers = try await withAppClient(fixture) { client in
                try await client.post(Self.mail, each: payloads.map { (kind: "badge", payload: $0) })
            }
            #expect(
                answers == [
                    "delivered=false", "io.coalesced.App.NotANumber", "delivered=false", "delivered=false",
                    "delivered=false",
                ]
            )
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent(untilEvents: 1)
            #expect(woken.callbacks == ["willEnterForeground", "didBecomeActive"])
            #expect(woken.events == [#"event badge count=4 payload={"unread":10}"#])
        }
    }

    /// Producers on connections of their own, posting to one active app at once: the app gets every event, and
    /// each producer's in the order it posted them.
    @Test func concurrentProducersReachAnActiveAppEachInItsOwnOrder() async throws {
        let (producers, posts) = (4, 200)
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            let launched = try await app.sent().callbacks
            #expect(launched == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            let answers = try await withThrowingTaskGroup(of: [String].self) { group in
                for producer in 0..<producers {
                    group.addTask {
                        // All of a producer's posts in one read, pipelined: they are decided back to back.
                        try await withAppClient(fixture) { client in
                            try await client.post(
                                Self.mail,
                                each: (0..<posts).map { number in
                                    (kind: "tick", payload: ["p": .int(Int64(producer)), "n": .int(Int64(number))])
                                }
                            )
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(answers.count == producers * posts && answers.allSatisfy { $0 == "delivered=true" })

            var events: [JSONValue] = []
            try await waitUntil("\(producers * posts) events (\(events.count) so far)") { () async throws -> Bool in
                events += try await app.callbacks()
                return events.count >= producers * posts
            }
            #expect(events.count == producers * posts)
            var last = [Int64](repeating: -1, count: producers)
            for event in events {
                let (producer, number) = (event["payload"]?["p"]?.intValue ?? -1, event["payload"]?["n"]?.intValue ?? -1)
                guard let index = Int(exactly: producer), last.indices.contains(index) else {
                    Issue.record("an event from no producer: \(event.jsonText)")
                    continue
                }
                #expect(number == last[index] + 1, "producer \(producer): \(number) after \(last[index])")
                last[index] = number
            }
            #expect(last == [Int64](repeating: Int64(posts - 1), count: producers))
        }
    }
}
