import CoalesceTestSupport
import Foundation
import Synchronization
import Testing
import Varlink

// Events to topics, and events that launch an app.
extension EventTests {
    @Test func aTopicReachesEverySubscriberThatLetsThePosterPost() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let client = try testClient(daemon.socketPath)
        _ = try client.call("io.coalesced.App.Register", ["name": "org.example.open", "topics": ["weather.alerts"], "posters": ["anyone": true]])
        _ = try client.call("io.coalesced.App.Register", ["name": "org.example.closed", "topics": ["weather.alerts", "news"]])
        _ = try client.call("io.coalesced.App.Register", ["name": "org.example.other", "topics": ["news"]])
        let both = try client.call(
            "io.coalesced.App.Post",
            ["target": "topic:weather.alerts", "kind": "storm", "payload": ["level": 3]]
        )
        #expect(both == ["delivered": false, "recipients": 2])
        for (app, expected) in [("org.example.open", 1), ("org.example.closed", 1), ("org.example.other", 0)] {
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(app)])["held"]?.arrayValue ?? []
            #expect(held.count == expected, "\(app)")
        }
        #expect(throws: VarlinkError(name: "io.coalesced.App.UnknownTarget", parameters: ["target": "topic:sports"])) {
            try client.call("io.coalesced.App.Post", ["target": "topic:sports", "kind": "goal", "payload": [:]])
        }
        // A mark combining with the colon is part of the target, not dropped with the prefix.
        let marked = "topic:\u{301}weather.alerts"
        #expect(throws: VarlinkError(name: "io.coalesced.App.UnknownTarget", parameters: ["target": .string(marked)])) {
            try client.call("io.coalesced.App.Post", ["target": .string(marked), "kind": "storm", "payload": [:]])
        }
        // A subscriber that refuses the post (it sums "level" for this kind, and this payload has none) is listed;
        // the other keeps it. When every subscriber refuses, the call fails.
        _ = try client.call(
            "io.coalesced.App.Register",
            ["name": "org.example.other", "topics": ["news"], "kinds": ["headline": ["policy": "sum", "field": "level"], "bulletin": ["policy": "sum", "field": "level"]]]
        )
        let partly = try client.call("io.coalesced.App.Post", ["target": "topic:news", "kind": "headline", "payload": ["text": "hi"]])
        #expect(partly["recipients"] == 1)
        #expect(
            partly["refused"] == [
                [
                    "app": "org.example.other", "error": "io.coalesced.App.NotANumber",
                    "parameters": ["target": "topic:news", "kind": "headline", "field": "level"],
                ]
            ]
        )
        _ = try client.call(
            "io.coalesced.App.Register",
            ["name": "org.example.closed", "topics": ["weather.alerts", "news"], "kinds": ["bulletin": ["policy": "sum", "field": "level"]]]
        )
        #expect(throws: VarlinkError(name: "io.coalesced.App.NotANumber", parameters: ["target": "topic:news", "kind": "bulletin", "field": "level"])) {
            try client.call("io.coalesced.App.Post", ["target": "topic:news", "kind": "bulletin", "payload": ["text": "again"]])
        }
        // Another user reaches only the subscribers that let anyone post.
        let copy = try executableCopy(of: "coalescectl", in: daemon.directory)
        let socket = daemon.socketPath
        let asNobody = try await onThread {
            try runProcess(
                "/usr/bin/setpriv",
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", socket, "call", "--json",
                 "io.coalesced.App.Post", #"{"target":"topic:weather.alerts","kind":"storm","payload":{"level":4}}"#]
            )
        }
        #expect(asNobody.stdout == #"{"delivered":false,"recipients":1}"# + "\n", "\(asNobody.stderr)")
        let refused = try await onThread {
            try runProcess(
                "/usr/bin/setpriv",
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", socket, "call",
                 "io.coalesced.App.Post", #"{"target":"topic:news","kind":"x","payload":{}}"#]
            )
        }
        #expect(refused.stderr.contains(#"io.coalesced.App.NotAllowedToPost {"target":"topic:news"}"#), "\(refused.stderr)")
        daemon.signal(SIGKILL)
    }

    @Test func aKindMappedToABackgroundModeLaunchesTheAppIntoTheBackground() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let client = try testClient(daemon.socketPath)
        let undeclared = VarlinkError(
            name: "io.coalesced.App.BackgroundModeNotDeclared",
            parameters: ["app": .string(Self.mail), "kind": "voip.call", "mode": "voip"]
        )
        #expect(throws: undeclared, "the mode must be one the app declares") {
            try client.call(
                "io.coalesced.App.Register",
                ["name": .string(Self.mail), "kinds": ["voip.call": ["policy": "latest", "backgroundMode": "voip"]]]
            )
        }
        _ = try client.call(
            "io.coalesced.App.Register",
            [
                "name": .string(Self.mail), "backgroundModes": ["voip"],
                "kinds": ["voip.call": ["policy": "latest", "backgroundMode": "voip"]],
            ]
        )
        // Registering again without kinds keeps them, the mode each wakes into included; dropping that mode while
        // keeping them is refused, and changes nothing.
        #expect(throws: undeclared) { try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)]) }
        _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail), "backgroundModes": ["voip"]])
        // An ordinary kind waits for the app to be opened; the mapped one launches it (here: waits for its process).
        #expect(try post(client, Self.mail, "mail.received", ["id": 1]) == false)
        #expect(try client.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])["app"]?["state"] == "notRunning")
        #expect(try post(client, Self.mail, "voip.call", ["from": "alice"]) == false)
        try await onThread {
            let app = try ExampleApp(socket: daemon.socketPath, name: Self.mail, arguments: ["--mode", "voip"])
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didEnterBackground"])
            #expect(try app.waitForLine("callback didFinishLaunching").contains("destination=background"))
            #expect(
                try app.events(atLeast: 2) == [
                    #"event mail.received count=1 payload={"id":1}"#, #"event voip.call count=1 payload={"from":"alice"}"#,
                ]
            )
            // Its acknowledgement of the events covers didEnterBackground: whatever it leads to has happened.
            let system = try testClient(daemon.socketPath)
            try waitForAcknowledged(system, Self.mail)
            let state = try system.call("io.coalesced.System.GetApp", ["app": .string(Self.mail)])
            #expect(state["app"]?["state"] == "background", "with its mode it is not suspended")
        }
        daemon.signal(SIGKILL)
    }
}
