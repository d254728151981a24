import CoalesceTestSupport
import Foundation
import InMemoryLogging
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Varlink

/// The real server on a Unix socket in a temporary directory, driven by the blocking client.
@Suite struct ServerTests {
    struct Undeclared: Error {}

    /// The interface the server is told to send its protocol errors in: the daemon's, as the assertions name it.
    static let protocolErrors = "io.coalesced.Protocol"

    static let interface = VarlinkInterface(
        text: """
            interface org.example.test
            method Echo(value: string) -> (value: string)
            method Count(n: int) -> (i: int)
            method Slow(value: string) -> (value: string)
            method Fail() -> ()
            method Forgetful() -> ()
            method Careless() -> (i: int)
            method Twice() -> ()
            method Meet(group: string, size: int, value: string) -> (value: string)
            method Stack(size: int, value: string) -> (value: string)
            method Peer() -> (uid: int, groups: ?[]int)
            method Held() -> (value: string)
            method Linger(token: string) -> (i: int)
            method Flood(size: int, bound: int) -> (i: int, padding: string)
            method Sleep(token: string) -> (i: int)
            error Overrun(sent: int)
            """,
        methods: [
            "Echo": .immediate { request in ["value": .string(try request.string("value"))] },
            "Count": .streaming { request, responder in
                guard responder.streams else { throw VarlinkError.expectedMore }
                let n = request.call.parameters["n"]?.intValue ?? 0
                for i in 0..<n { responder.send(["i": .int(i)]) }
                responder.finish(["i": .int(n)])
            },
            // A method that takes its time (the sleep is the method's work, not a test's wait), so that what comes
            // behind it is read while it runs.
            "Slow": .streaming { request, responder in
                try await Task.sleep(for: .milliseconds(50))
                responder.finish(["value": .string(try request.string("value"))])
            },
            "Fail": .immediate { _ in throw Undeclared() },
            // Bugs a method may have; none may break the conversation.
            "Forgetful": .streaming { _, _ in },
            "Careless": .streaming { _, responder in responder.send(["i": 1]) },
            "Twice": .streaming { _, responder in
                responder.finish()
                throw Undeclared()
            },
            // Answers once `size` calls of its group are in flight at the same time: served one after the other,
            // the first would never answer.
            "Meet": .deferred { request, reply in
                let group = try request.string("group")
                let value = try request.string("value")
                // On a thread of its own, not a task: tests that block the concurrency pool's few threads must not
                // keep a call from meeting the others.
                let size = Int(request.call.parameters["size"]?.intValue ?? 1)
                Thread.detachNewThread {
                    Rendezvous.shared.meet(group, size: size)
                    reply.succeed(["value": .string(value)])
                }
            },
            "Peer": .immediate { request in
                [
                    "uid": .int(Int64(request.peer?.uid ?? 99_999)),
                    "groups": request.peer?.groups.map { .array($0.map { .int(Int64($0)) }) } ?? .null,
                ]
            },
            // Parks its reply for the test to give, from the test's own thread.
            "Held": .deferred { _, reply in Held.shared.park(reply) },
            // Streams two replies, the second a moment after the first (so that a client reading the first has not
            // read the second with it), then runs until its call is cancelled, which it records under its token.
            "Linger": .streaming { request, responder in
                let token = try request.string("token")
                responder.send(["i": 1])
                try await Task.sleep(for: .milliseconds(20))
                responder.send(["i": 2])
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
                Lingered.cancelled.withLock { _ = $0.insert(token) }
            },
            // Streams one reply, then sleeps until its call is cancelled, which ends the sleep with
            // CancellationError, and records that under its token.
            "Sleep": .streaming { request, responder in
                let token = try request.string("token")
                defer { Lingered.cancelled.withLock { _ = $0.insert(token) } }
                responder.send(["i": 1])
                try await Task.sleep(for: .seconds(3600))
            },
            // Streams replies of `size` bytes until more than `bound` of them are unwritten, then ends with
            // Overrun and closes the connection, as a stream ends a reader that does not keep up.
            "Flood": .streaming { request, responder in
                let padding = String(repeating: "x", count: Int(request.call.parameters["size"]?.intValue ?? 1))
                let bound = Int(request.call.parameters["bound"]?.intValue ?? 0)
                var sent = 0
                while responder.backlog <= bound {
                    responder.send(["i": .int(Int64(sent)), "padding": .string(padding)])
                    sent += 1
                }
                responder.failAndClose(VarlinkError(name: "org.example.test.Overrun", parameters: ["sent": .int(Int64(sent))]))
            },
            // Started in call order; answered, from other threads, only once `size` calls are started, the last
            // first. Tests running at once tell their calls apart by size.
            "Stack": .deferred { request, reply in
                let value = try request.string("value")
                guard value != "refuse" else { throw VarlinkError.invalidParameter("value") }
                Stack.shared.push(value, size: Int(request.call.parameters["size"]?.intValue ?? 1), reply)
            },
        ]
    )

    final class Stack: @unchecked Sendable {
        static let shared = Stack()
        private let lock = NSLock()
        private var startedBySize: [Int: [String]] = [:]
        private var waiting: [Int: [(String, VarlinkPromisedReply)]] = [:]

        func started(size: Int) -> [String] { self.lock.withLock { self.startedBySize[size] ?? [] } }

        func push(_ value: String, size: Int, _ reply: VarlinkPromisedReply) {
            let ready = self.lock.withLock { () -> [(String, VarlinkPromisedReply)] in
                self.startedBySize[size, default: []].append(value)
                self.waiting[size, default: []].append((value, reply))
                guard self.waiting[size]!.count >= size else { return [] }
                defer { self.waiting[size] = [] }
                return self.waiting[size]!
            }
            for (value, reply) in ready.reversed() {
                DispatchQueue.global().async { reply.succeed(["value": .string(value)]) }
            }
        }
    }

    /// The tokens of the Linger calls that were cancelled.
    enum Lingered {
        static let cancelled = Mutex<Set<String>>([])
    }

    final class Held: Sendable {
        static let shared = Held()
        private let parked = Mutex<[VarlinkPromisedReply]>([])
        private let arrived = DispatchSemaphore(value: 0)

        func park(_ reply: VarlinkPromisedReply) {
            self.parked.withLock { $0.append(reply) }
            self.arrived.signal()
        }

        /// The next parked reply, once its call has been dispatched.
        func next() -> VarlinkPromisedReply? {
            guard self.arrived.wait(timeout: .now() + 10) == .success else { return nil }
            return self.parked.withLock { $0.removeFirst() }
        }
    }

    /// Where concurrent test calls wait for each other.
    /// Calls of a group wait for each other: each returns once `size` of them have arrived.
    final class Rendezvous: @unchecked Sendable {
        static let shared = Rendezvous()
        private let condition = NSCondition()
        /// Calls arrived per group still gathering; a group that met is gone from it.
        private var arrived: [String: Int] = [:]

        func meet(_ group: String, size: Int) {
            self.condition.lock()
            defer { self.condition.unlock() }
            self.arrived[group, default: 0] += 1
            if self.arrived[group]! >= size {
                self.arrived[group] = nil
                self.condition.broadcast()
                return
            }
            while self.arrived[group] != nil { self.condition.wait() }
        }
    }

    /// Serves the test interface for the duration of `body`.
    /// - Parameters:
    ///   - isPrivileged: which peers the server treats as privileged (all of the test's connections are root's).
    ///   - logger: where the server logs; nowhere by default.
    func withServer(
        limits: VarlinkServerLimits = VarlinkServerLimits(),
        isPrivileged: @escaping @Sendable (VarlinkPeer) -> Bool = { $0.uid == 0 },
        logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ body: @escaping @Sendable (String, VarlinkServer) throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("test.sock")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = VarlinkServer(
            service: VarlinkService(
                info: VarlinkServiceInfo(vendor: "v", product: "p", version: "1", url: "u"),
                interfaces: [Self.interface],
                protocolErrorInterface: Self.protocolErrors
            ),
            limits: limits,
            group: group,
            logger: logger,
            isPrivileged: isPrivileged
        )
        try await server.start(.path(path))
        async let serving: Void = server.run()
        do {
            try await onThread { try body(path, server) }
        } catch {
            await server.shutdown()
            await serving
            try await group.shutdownGracefully()
            throw error
        }
        await server.shutdown()
        await serving
        try await group.shutdownGracefully()
        #expect(access(path, F_OK) != 0, "the socket file is removed on shutdown")
    }

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

    @Test func streamsRepliesWithMoreAndRefusesWithoutIt() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            var received: [Int64] = []
            try client.callMore("org.example.test.Count", ["n": 3]) { reply in
                received.append(reply["i"]?.intValue ?? -1)
            }
            #expect(received == [0, 1, 2, 3])
            #expect(throws: VarlinkError.expectedMore) { try client.call("org.example.test.Count", ["n": 3]) }
        }
    }

    /// A client that hangs up with replies of a streaming call still unread makes the server's next read fail
    /// (ECONNRESET) rather than end: the call is cancelled all the same, as it is when the client hangs up cleanly.
    @Test func aStreamingCallEndsWhenItsClientHangsUpWithRepliesUnread() async throws {
        try await self.withServer { path, _ in
            for round in 0..<20 {
                let token = "\(getpid())-\(round)"
                let client = try testClient(path)
                try client.send(VarlinkCall(method: "org.example.test.Linger", parameters: ["token": .string(token)], more: true))
                #expect(try client.receiveReply().parameters["i"] == 1)
                try waitUntil("the second reply to reach the client's socket", timeout: .seconds(10), poll: .milliseconds(1)) {
                    client.hasPendingInput
                }
                withExtendedLifetime(client) {}  // closed here, with the second reply unread
            }
            try waitUntil("every call to be cancelled", timeout: .seconds(10), poll: .milliseconds(10)) {
                Lingered.cancelled.withLock { cancelled in (0..<20).allSatisfy { cancelled.contains("\(getpid())-\($0)") } }
            }
        }
    }

    /// A streaming call ended because its client went away is no bug of the method, whether the method returns
    /// or throws `CancellationError`: it is logged at debug, not as an error, however many clients do it. A method
    /// that returns without a final reply while its client is still there is a bug, and is logged as an error.
    @Test func aStreamingCallEndedByItsClientLeavingIsNotLoggedAsAnError() async throws {
        let log = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in log })
        logger.logLevel = .trace
        try await self.withServer(logger: logger) { path, _ in
            for round in 0..<6 {
                let token = "gone-\(getpid())-\(round)"
                let method = round % 2 == 0 ? "org.example.test.Linger" : "org.example.test.Sleep"
                do {
                    let client = try testClient(path)
                    try client.send(VarlinkCall(method: method, parameters: ["token": .string(token)], more: true))
                    #expect(try client.receiveReply().parameters["i"] == 1)
                    // Linger's second reply read too: the client leaves while the method waits for cancellation.
                    if round % 2 == 0 { #expect(try client.receiveReply().parameters["i"] == 2) }
                }  // closed here, with the call running
                try waitUntil("the call to be cancelled", timeout: .seconds(10), poll: .milliseconds(10)) {
                    Lingered.cancelled.withLock { $0.contains(token) }
                }
            }
            let client = try testClient(path)
            #expect(throws: (any Error).self) { try client.call("org.example.test.Forgetful") }
        }
        // Read once the server has stopped: every call has ended and logged what it did.
        let bugs = log.entries.filter { $0.level >= .error }
        #expect(bugs.count == 1, "\(bugs)")
        #expect(bugs.first?.message.description == "Method returned without a final reply")
        #expect(bugs.first?.metadata["method"] == "org.example.test.Forgetful")
    }

    /// A stream that ends a reader for not keeping up (``VarlinkResponder/failAndClose(_:)``) gives a reader that
    /// reads after a pause every reply sent before the end, then the error, then the end of the connection.
    @Test func aReaderEndedForNotReadingGetsEveryReplyThenTheErrorThenTheEnd() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            try client.send(VarlinkCall(method: "org.example.test.Flood", parameters: ["size": 10_000, "bound": .int(1 << 20)], more: true))
            // Not read for a while: the kernel's buffer fills, and the rest waits in the server. A sleep, not a wait:
            // nothing tells the client that the server has sent everything, and the replies are checked the same
            // either way.
            usleep(500_000)
            var received = 0
            while true {
                let reply = try client.receiveReply()
                if let error = reply.error {
                    #expect(error == "org.example.test.Overrun")
                    #expect(reply.parameters["sent"] == .int(Int64(received)), "every reply sent came before the error")
                    break
                }
                #expect(reply.parameters["i"] == .int(Int64(received)))
                received += 1
            }
            #expect(received > 100)
            #expect(client.waitForClose(timeout: .seconds(10)), "the connection ends after the error")
        }
    }

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

    @Test func aMethodThatBreaksItsReplyContractStillEndsItsCallExactlyOnce() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect {
                try client.call("org.example.test.Forgetful")
            } throws: { error in
                (error as? VarlinkError)?.varlinkName == "io.coalesced.Protocol.InternalError"
            }
            #expect(throws: VarlinkError.expectedMore) { try client.call("org.example.test.Careless") }
            #expect(try client.call("org.example.test.Twice") == [:])
            // Still in step: the next reply belongs to the next call.
            #expect(try client.call("org.example.test.Echo", ["value": "next"]) == ["value": "next"])
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
