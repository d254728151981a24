import CoalesceTestSupport
import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
import Varlink

/// The real server on a Unix socket in a temporary directory, driven by the blocking client. The test interface and
/// the server it runs on are in ServerTests+Fixture.swift.
@Suite struct ServerTests {
    @Test func answersACall() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect(try client.call("org.example.test.Echo", ["value": "hi"]) == ["value": "hi"])
        }
    }

    @Test func standardErrorsForUnknownInterfaceMethodAndParameter() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect(throws: VarlinkError.interfaceNotFound("org.example.nope")) {
                try client.call("org.example.nope.Echo")
            }
            #expect(throws: VarlinkError.methodNotFound("org.example.test.Nope")) {
                try client.call("org.example.test.Nope")
            }
            #expect(throws: VarlinkError.invalidParameter("value", reason: "missing; expected a string")) {
                try client.call("org.example.test.Echo")
            }
            #expect(throws: VarlinkError.invalidParameter("value", reason: "expected a string, got an int")) {
                try client.call("org.example.test.Echo", ["value": 5])
            }
            // The connection survives a method's error.
            #expect(try client.call("org.example.test.Echo", ["value": "still"]) == ["value": "still"])
        }
    }

    /// Parameters are checked against the declared types before any kind of method runs: an immediate one, a
    /// streaming one, a deferred one.
    @Test func parametersOfAnotherTypeNeverReachTheMethod() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect(throws: VarlinkError.invalidParameter("n", reason: "expected an int, got a string")) {
                try client.callMore("org.example.test.Count", ["n": "3"]) { _ in }
            }
            #expect(throws: VarlinkError.invalidParameter("size", reason: "expected an int, got a float (1.5)")) {
                try client.call("org.example.test.Stack", ["size": 1.5, "value": "typed"])
            }
            #expect(Stack.shared.started(size: 1) == [], "the deferred method never started")
            #expect(throws: VarlinkError.invalidParameter("interface", reason: "expected a string, got an array")) {
                try client.call("org.varlink.service.GetInterfaceDescription", ["interface": ["org.example.test"]])
            }
            #expect(try client.call("org.example.test.Echo", ["value": "still", "undeclared": 1]) == ["value": "still"])
        }
    }

    /// `upgrade` is a field of the message, not a parameter: a method that offers no other protocol answers with
    /// the protocol's error, and the connection goes on speaking Varlink.
    @Test func anUpgradeIsRefusedAndTheConnectionStaysVarlink() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            try client.send(VarlinkCall(method: "org.example.test.Echo", parameters: ["value": "up"], upgrade: true))
            let reply = try client.receiveReply()
            #expect(reply.error == Self.protocolErrors + ".UpgradeNotSupported")
            #expect(reply.parameters == ["method": "org.example.test.Echo"])
            #expect(try client.call("org.example.test.Echo", ["value": "after"]) == ["value": "after"])
        }
    }

    @Test func undeclaredErrorsBecomeInternalError() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect {
                try client.call("org.example.test.Fail")
            } throws: { error in
                (error as? VarlinkError)?.varlinkName == "io.coalesced.Protocol.InternalError"
            }
        }
    }

    @Test func describesItselfAndItsInterfaces() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            let info = try client.call("org.varlink.service.GetInfo")
            #expect(info["interfaces"] == ["org.example.test", "org.varlink.service"])
            #expect(info["vendor"] == "v")
            let description = try client.call(
                "org.varlink.service.GetInterfaceDescription",
                ["interface": "org.example.test"]
            )
            #expect(description["description"]?.stringValue == Self.interface.description.text)
            let own = try client.call(
                "org.varlink.service.GetInterfaceDescription",
                ["interface": "org.varlink.service"]
            )
            #expect(own["description"]?.stringValue?.contains("method GetInfo()") == true)
            #expect(throws: VarlinkError.interfaceNotFound("org.example.nope")) {
                try client.call("org.varlink.service.GetInterfaceDescription", ["interface": "org.example.nope"])
            }
        }
    }

    @Test func thePeerIsWhatTheKernelSays() async throws {
        try await self.withServer { path, _ in
            let reply = try testClient(path).call("org.example.test.Peer")
            #expect(reply["uid"] == .int(Int64(getuid())))
            // SO_PEERGROUPS: this process's supplementary groups (a lone 0 reads as none: see VarlinkPeerGroups).
            var own = [gid_t](repeating: 0, count: 512)
            let count = Int(getgroups(Int32(own.count), &own))
            let expected = count == 1 && own[0] == 0 ? [] : own.prefix(count).sorted()
            #expect(reply["groups"] == .array(expected.map { .int(Int64($0)) }))
        }
    }

    @Test func onewayCallsGetNoReply() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            try client.send(VarlinkCall(method: "org.example.test.Echo", parameters: ["value": "quiet"], oneway: true))
            #expect(try client.call("org.example.test.Echo", ["value": "loud"]) == ["value": "loud"])
        }
    }

    @Test func brokenPeerGetsAnErrorAndIsClosedWhileOthersAreServed() async throws {
        try await self.withServer(limits: VarlinkServerLimits(maximumMessageSize: 4096)) { path, server in
            let bystander = try testClient(path)
            for garbage in ["not json", #"{"method":"a.b.C","parameters":7}"#, "[1,2"] {
                let broken = try testClient(path)
                try broken.sendRaw(Array(garbage.utf8) + [0])
                let reply = try broken.receiveReply()
                #expect(reply.error == "io.coalesced.Protocol.InvalidMessage", "for \(garbage)")
                #expect(broken.waitForClose(timeout: .seconds(10)))
            }
            let oversized = try testClient(path)
            // A send can fail once the server hangs up mid-way; the error reply is what matters.
            try? oversized.sendRaw([UInt8](repeating: UInt8(ascii: " "), count: 8192))
            #expect(try oversized.receiveReply() == VarlinkReply(error: VarlinkProtocolError.messageTooLarge(limit: 4096).varlinkError(in: Self.protocolErrors)))
            #expect(oversized.waitForClose(timeout: .seconds(10)))
            do {
                let truncated = try testClient(path)
                try truncated.sendRaw(Array(#"{"method":"org.exa"#.utf8))
            }
            #expect(try bystander.call("org.example.test.Echo", ["value": "fine"]) == ["value": "fine"])
            #expect(server.statistics.snapshot.protocolErrors == 4)
        }
    }

    @Test func connectionsOverTheLimitAreClosed() async throws {
        try await self.withServer(limits: VarlinkServerLimits(maximumConnections: 2)) { path, server in
            let first = try testClient(path)
            let second = try testClient(path)
            _ = try first.call("org.example.test.Echo", ["value": "1"])
            _ = try second.call("org.example.test.Echo", ["value": "2"])
            let third = try testClient(path)
            #expect(try third.receiveReply() == Self.refusal(.connections(limit: 2)))
            #expect(third.waitForClose(timeout: .seconds(10)))
            #expect(server.statistics.snapshot.connectionsRefused == 1)
            #expect(try first.call("org.example.test.Echo", ["value": "1"]) == ["value": "1"])
        }
    }

    @Test func refusesASocketAnotherServerAnswersOn() async throws {
        try await self.withServer { path, _ in
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            defer { try? group.syncShutdownGracefully() }
            let second = VarlinkServer(
                service: VarlinkService(
                    info: VarlinkServiceInfo(vendor: "", product: "", version: "", url: ""),
                    interfaces: [],
                    protocolErrorInterface: Self.protocolErrors
                ),
                limits: VarlinkServerLimits(),
                group: group,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let semaphore = DispatchSemaphoreBox()
            Task {
                do {
                    try await second.start(.path(path))
                    semaphore.finish(nil)
                } catch {
                    semaphore.finish(error)
                }
            }
            let error = semaphore.wait()
            #expect(error as? VarlinkServerError == .alreadyServed(path: path))
        }
    }
}
