import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The order of replies: pipelined calls, calls split across reads, deferred and concurrent calls answered out of
/// order, and what comes behind a running call.
extension ServerTests {
    @Test func pipelinedCallsAreAnsweredInOrderAcrossSlowOnes() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            var batch: [UInt8] = []
            for index in 0..<20 {
                let method = index % 5 == 0 ? "org.example.test.Slow" : "org.example.test.Echo"
                VarlinkCall(method: method, parameters: ["value": .string("\(index)")]).message.write(to: &batch)
                batch.append(0)
            }
            try client.sendRaw(batch)
            for index in 0..<20 {
                #expect(try client.receiveReply().parameters["value"] == .string("\(index)"))
            }
        }
    }

    /// The server splits what it reads into messages itself: a call dripped in a few bytes at a time, and calls
    /// whose boundaries fall anywhere within the reads, are each answered once, in order.
    @Test func callsSplitAcrossReadsAtAnyPointAreEachAnswered() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            var stream: [UInt8] = []
            for index in 0..<50 {
                VarlinkCall(method: "org.example.test.Echo", parameters: ["value": .string("call \(index)")]).message
                    .write(to: &stream)
                stream.append(0)
            }
            // Pieces of 1 to 97 bytes, each its own write with a pause, so that the server reads them apart: a sleep,
            // not a wait, since nothing tells the client that the server has read a piece.
            var start = 0
            var piece = 1
            while start < stream.count {
                let end = min(stream.count, start + piece)
                try client.sendRaw(Array(stream[start..<end]))
                usleep(200)
                start = end
                piece = piece % 97 + 7
            }
            for index in 0..<50 {
                #expect(try client.receiveReply().parameters["value"] == .string("call \(index)"))
            }
        }
    }

    @Test func aClientThatSendsFasterThanItReadsGetsEveryReplyInOrder() async throws {
        // 2 MB of calls whose replies the client reads only later: the server must stop reading while replies pile
        // up, and lose or reorder none of them.
        try await self.withServer { path, _ in
            let client = try testClient(path)
            let count = 40_000
            // Sending touches only the socket, reading only the receive buffer: one thread each is safe.
            nonisolated(unsafe) let sending = client
            let sender = Thread {
                var batch: [UInt8] = []
                for index in 0..<count {
                    VarlinkCall(method: "org.example.test.Echo", parameters: ["value": .string("\(index)")]).message
                        .write(to: &batch)
                    batch.append(0)
                }
                // A send error shows as missing replies below.
                try? sending.sendRaw(batch)
            }
            sender.start()
            // Let the server fill its write buffer and the kernel's before anything is read. A sleep, not a wait:
            // nothing tells the client that the buffers are full (the server just stops reading), and the replies
            // are checked the same either way; the pause only makes the pile-up certain.
            usleep(200_000)
            for index in 0..<count {
                let reply = try client.receiveReply()
                guard reply.parameters["value"] == .string("\(index)") else {
                    Issue.record("reply \(index) was \(reply)")
                    return
                }
            }
        }
    }

    @Test func aBadMessageBehindARunningCallIsRefusedInItsTurn() async throws {
        try await self.withServer { path, server in
            let client = try testClient(path)
            var bytes: [UInt8] = []
            VarlinkCall(method: "org.example.test.Slow", parameters: ["value": "first"]).message.write(to: &bytes)
            bytes += [0] + Array("garbage".utf8) + [0]
            try client.sendRaw(bytes)
            #expect(try client.receiveReply().parameters["value"] == "first")
            #expect(try client.receiveReply().error == "io.coalesced.Protocol.InvalidMessage")
            #expect(client.waitForClose(timeout: .seconds(10)))
            #expect(server.statistics.snapshot.protocolErrors == 1)
        }
    }

    @Test func concurrentCallsRunTogetherAndAnswerInCallOrder() async throws {
        try await self.withServer { path, _ in
            // What is checked is the order; a whole test run's load can hold the streaming call's task back a while.
            let client = try testClient(path, timeout: .seconds(60))
            var bytes: [UInt8] = []
            // Three concurrent calls that can only answer together, an immediate one behind them, then a streaming
            // one that must wait for all four.
            for value in ["a", "b", "c"] {
                VarlinkCall(method: "org.example.test.Meet", parameters: ["group": "g1", "size": 3, "value": .string(value)])
                    .message.write(to: &bytes)
                bytes.append(0)
            }
            VarlinkCall(method: "org.example.test.Echo", parameters: ["value": "d"]).message.write(to: &bytes)
            bytes.append(0)
            VarlinkCall(method: "org.example.test.Slow", parameters: ["value": "e"]).message.write(to: &bytes)
            bytes.append(0)
            VarlinkCall(method: "org.example.test.Nope").message.write(to: &bytes)
            bytes.append(0)
            try client.sendRaw(bytes)
            let replies = try (0..<5).map { _ in try client.receiveReply().parameters["value"]?.stringValue }
            #expect(replies == ["a", "b", "c", "d", "e"])
            #expect(try client.receiveReply().error == "org.varlink.service.MethodNotFound")
            #expect(try client.call("org.example.test.Echo", ["value": "after"]) == ["value": "after"])
        }
    }

    /// Answers given together on another thread (a store's writer answering a commit's calls) go out when the
    /// gathering ends, all at once, not one wake of the connection for the first and more for the rest.
    @Test func answersGatheredOnAThreadGoOutWhenTheGatheringEnds() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path, timeout: .milliseconds(300))
            try client.send(VarlinkCall(method: "org.example.test.Held"))
            try client.send(VarlinkCall(method: "org.example.test.Held"))
            guard let first = Held.shared.next(), let second = Held.shared.next() else {
                Issue.record("the calls were not dispatched")
                return
            }
            VarlinkAnswerGathering.gather {
                first.succeed(["value": "first"])
                second.succeed(["value": "second"])
                // Still gathering: the connection was not woken, so nothing has gone out.
                #expect(throws: VarlinkClientError.self) { try client.receiveReply() }
            }
            #expect(try client.receiveReply().parameters["value"] == "first")
            #expect(try client.receiveReply().parameters["value"] == "second")
        }
    }

    @Test func deferredCallsStartInCallOrderAndAnswerInCallOrder() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path, timeout: .seconds(10))
            var bytes: [UInt8] = []
            for value in ["a", "b", "c", "refuse"] {
                VarlinkCall(method: "org.example.test.Stack", parameters: ["size": 3, "value": .string(value)]).message.write(to: &bytes)
                bytes.append(0)
            }
            VarlinkCall(method: "org.example.test.Echo", parameters: ["value": "d"]).message.write(to: &bytes)
            bytes.append(0)
            try client.sendRaw(bytes)
            let replies = try (0..<5).map { _ in try client.receiveReply() }
            #expect(replies.map { $0.parameters["value"]?.stringValue } == ["a", "b", "c", nil, "d"])
            #expect(replies[3].error == "org.varlink.service.InvalidParameter")
            #expect(Stack.shared.started(size: 3) == ["a", "b", "c"], "started in the order the calls came")
        }
    }

    @Test func aOnewayCallAmongDeferredOnesAnsweredOutOfOrderGetsNoReplyAndHoldsNothingUp() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path, timeout: .seconds(10))
            var bytes: [UInt8] = []
            // Answered e, c, b, a: the oneway call's answer comes between those owed.
            for (value, oneway) in [("a", false), ("b", false), ("c", true), ("e", false)] {
                VarlinkCall(method: "org.example.test.Stack", parameters: ["size": 4, "value": .string(value)], oneway: oneway)
                    .message.write(to: &bytes)
                bytes.append(0)
            }
            VarlinkCall(method: "org.example.test.Echo", parameters: ["value": "f"]).message.write(to: &bytes)
            bytes.append(0)
            try client.sendRaw(bytes)
            let replies = try (0..<4).map { _ in try client.receiveReply() }
            #expect(replies.map { $0.parameters["value"]?.stringValue } == ["a", "b", "e", "f"])
            #expect(Stack.shared.started(size: 4) == ["a", "b", "c", "e"])
            // And nothing more: the next call's reply is the next to come.
            #expect(try client.call("org.example.test.Echo", ["value": "g"]) == ["value": "g"])
        }
    }
}
