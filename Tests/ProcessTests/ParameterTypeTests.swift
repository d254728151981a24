import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Every parameter is checked against the type its interface file declares, by the real daemon over its socket: a
/// value of another type is refused with `InvalidParameter` naming it (its path, where nested) and saying why, and
/// nothing is changed.
@Suite struct ParameterTypeTests {
    static let mail = "org.example.mail"

    static func invalid(_ parameter: String, _ reason: String) -> VarlinkError {
        .invalidParameter(parameter, reason: reason)
    }

    @Test func aPostersMemberOfAnotherTypeIsRefusedNotReadAsFalse() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            #expect(throws: Self.invalid("posters.anyone", "expected a bool, got a string")) {
                try client.call("io.coalesced.App.Register", ["name": .string(Self.mail), "posters": ["anyone": "yes"]])
            }
            #expect(throws: Self.invalid("posters.uids[1]", "expected an int, got a string")) {
                try client.call("io.coalesced.App.Register", ["name": .string(Self.mail), "posters": ["uids": [1000, "1001"]]])
            }
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 0, "nothing was registered")
        }
        daemon.signal(SIGKILL)
    }

    @Test func aPolicyMemberOfAnotherTypeIsRefusedOnPostAndRegister() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            #expect(throws: Self.invalid("policy.backgroundMode", "expected a string, got an int")) {
                try post(client, Self.mail, "mail", [:], policy: ["policy": "latest", "backgroundMode": 3])
            }
            #expect(throws: Self.invalid("policy.bound", "expected an int, got a float (2.5)")) {
                try post(client, Self.mail, "mail", [:], policy: ["policy": "queue", "bound": 2.5])
            }
            #expect(throws: Self.invalid("kinds[\"mail.new\"].volatile", "expected a bool, got an int")) {
                try client.call(
                    "io.coalesced.App.Register",
                    ["name": .string(Self.mail), "kinds": ["mail.new": ["policy": "count", "volatile": 1]]]
                )
            }
            #expect(throws: Self.invalid("kind", "missing; expected a string")) {
                try client.call("io.coalesced.App.Post", ["target": .string(Self.mail), "payload": [:]])
            }
            #expect(throws: Self.invalid("payload", "expected an object, got an array")) {
                try post(client, Self.mail, "mail", [1, 2])
            }
            let queue = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.mail)])
            #expect(queue["held"]?.arrayValue?.isEmpty == true, "nothing refused was held")
        }
        daemon.signal(SIGKILL)
    }

    @Test func anUpgradeIsAnsweredAsNotSupportedAndTheConnectionStaysVarlink() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            try client.send(VarlinkCall(method: "io.coalesced.System.Stats", upgrade: true))
            let reply = try client.receiveReply()
            #expect(reply.error == "io.coalesced.Protocol.UpgradeNotSupported")
            #expect(reply.parameters == ["method": "io.coalesced.System.Stats"])
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 0, "the same connection still serves")
        }
        daemon.signal(SIGKILL)
    }

    @Test func aConfigurationLineWithANulIsShownWholeWithItsLineNumber() async throws {
        let daemon = try DaemonProcess(configuration: "[Apps]\nMaxApps=5\u{0}x\n")
        #expect(try await onThread { daemon.waitForExit() } == 78)
        #expect(
            daemon.output.contains(#"coalesced.conf:2: NUL byte in line 'MaxApps=5\0x'; a configuration file is text"#),
            "\(daemon.output)"
        )
    }
}
