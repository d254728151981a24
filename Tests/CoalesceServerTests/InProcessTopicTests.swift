@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Synchronization
import Testing
import Varlink

/// Events to topics, and events that launch an app, on the manager in process: posters are ``AppClient``s, so that
/// what a topic's post came to (its recipients, the subscribers that refused it) is read as the wire gives it.
@Suite struct InProcessTopicTests {
    static let mail = "org.example.mail"

    @Test func aTopicReachesEverySubscriberThatLetsThePosterPost() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register("org.example.open", posters: ["anyone": true], topics: ["weather.alerts"])
            try await fixture.register("org.example.closed", topics: ["weather.alerts", "news"])
            try await fixture.register("org.example.other", topics: ["news"])
            try await withAppClient(fixture) { client in
                let both = try await client.post("topic:weather.alerts", "storm", ["level": 3])
                #expect(both == ["delivered": false, "recipients": 2])
                for (app, expected) in [("org.example.open", 1), ("org.example.closed", 1), ("org.example.other", 0)] {
                    #expect(try fixture.manager.queue(of: app).held.count == expected, "\(app)")
                }
                let unknown = await refusal { try await client.post("topic:sports", "goal", [:]) }
                #expect(unknown == VarlinkError(name: "io.coalesced.App.UnknownTarget", parameters: ["target": "topic:sports"]))
                // A mark combining with the colon is part of the target, not dropped with the prefix.
                let marked = "topic:\u{301}weather.alerts"
                let markedRefusal = await refusal { try await client.post(marked, "storm", [:]) }
                #expect(
                    markedRefusal == VarlinkError(name: "io.coalesced.App.UnknownTarget", parameters: ["target": .string(marked)])
                )

                // A subscriber that refuses the post (it sums "level" for this kind, and this payload has none) is
                // listed; the other keeps it. When every subscriber refuses, the call fails.
                let sums: JSONValue = [
                    "headline": ["policy": "sum", "field": "level"], "bulletin": ["policy": "sum", "field": "level"],
                ]
                try await fixture.register("org.example.other", kinds: sums, topics: ["news"])
                let partly = try await client.post("topic:news", "headline", ["text": "hi"])
                #expect(partly["recipients"] == 1)
                #expect(
                    partly["refused"] == [
                        [
                            "app": "org.example.other", "error": "io.coalesced.App.NotANumber",
                            "parameters": ["target": "topic:news", "kind": "headline", "field": "level"],
                        ]
                    ]
                )
                try await fixture.register(
                    "org.example.closed", kinds: ["bulletin": ["policy": "sum", "field": "level"]],
                    topics: ["weather.alerts", "news"]
                )
                let everyone = await refusal { try await client.post("topic:news", "bulletin", ["text": "again"]) }
                #expect(
                    everyone
                        == VarlinkError(
                            name: "io.coalesced.App.NotANumber",
                            parameters: ["target": "topic:news", "kind": "bulletin", "field": "level"]
                        )
                )
            }
            // Another user reaches only the subscribers that let anyone post.
            try await withAppClient(fixture, uid: 65534) { client in
                let open = try await client.post("topic:weather.alerts", "storm", ["level": 4])
                #expect(open == ["delivered": false, "recipients": 1])
                let closed = await refusal { try await client.post("topic:news", "x", [:]) }
                #expect(closed == VarlinkError(name: "io.coalesced.App.NotAllowedToPost", parameters: ["target": "topic:news"]))
            }
            #expect(try fixture.manager.queue(of: "org.example.open").held.first?.slot.count == 2)
            #expect(try fixture.manager.queue(of: "org.example.closed").held.map(\.slot.count) == [1, 1])
        }
    }

    @Test func aKindMappedToABackgroundModeLaunchesTheAppIntoTheBackground() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let undeclared = VarlinkError(
                name: "io.coalesced.App.BackgroundModeNotDeclared",
                parameters: ["app": .string(Self.mail), "kind": "voip.call", "mode": "voip"]
            )
            let voip: JSONValue = ["voip.call": ["policy": "latest", "backgroundMode": "voip"]]
            try await withAppClient(fixture) { client in
                let withoutMode = await refusal {
                    try await client.call("Register", ["name": .string(Self.mail), "kinds": voip])
                }
                #expect(withoutMode == undeclared, "the mode must be one the app declares")
                try await client.call("Register", ["name": .string(Self.mail), "backgroundModes": ["voip"], "kinds": voip])
                // Registering again without kinds keeps them, the mode each wakes into included; dropping that mode
                // while keeping them is refused, and changes nothing.
                let dropped = await refusal { try await client.call("Register", ["name": .string(Self.mail)]) }
                #expect(dropped == undeclared)
                #expect(try fixture.manager.get(Self.mail).registration.traits.backgroundModes == ["voip"])
                try await client.call("Register", ["name": .string(Self.mail), "backgroundModes": ["voip"]])

                // An ordinary kind waits for the app to be opened; the mapped one launches it, which waits for its
                // process.
                let ordinary = try await client.post(Self.mail, "mail.received", ["id": 1])
                #expect(ordinary["delivered"] == false)
                #expect(try fixture.manager.get(Self.mail).state == .notRunning)
                let mapped = try await client.post(Self.mail, "voip.call", ["from": "alice"])
                #expect(mapped["delivered"] == false)
            }
            let appName = try AppName(Self.mail)
            try await waitUntil("the launch the event started") {
                fixture.manager.state.withLock { $0.records[appName]?.pendingLaunch != nil }
            }
            let app = try await fixture.attach(Self.mail)
            let launch = try await app.replies(atLeast: 5).compactMap { $0["parameters"]?["callback"] }
            #expect(
                launch.compactMap { $0["kind"]?.stringValue } == [
                    "lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didEnterBackground", "mail.received", "voip.call",
                ]
            )
            #expect(launch.first?["launchOptions"]?["destination"] == "background")
            #expect(launch.last?["payload"] == ["from": "alice"])
            try app.acknowledge()
            #expect(try app.state == .background, "with its mode it is not suspended")
        }
    }
}
