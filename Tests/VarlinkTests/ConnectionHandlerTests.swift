import CoalesceTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import Varlink

/// One connection's handler on a testing channel, with no socket: the test is the peer. What it writes in is one
/// read of the connection, and what the handler writes out is read back write by write, so that each test states
/// exactly which replies went out, and in how many writes.
@Suite struct ConnectionHandlerTests {
    static let protocolErrors = "io.coalesced.Protocol"

    /// How the streaming call `Park` ended.
    enum ParkEnd: Sendable, Equatable {
        /// The test let it go, and it gave its final reply.
        case released
        /// Its connection ended first, which cancelled it.
        case cancelled
    }

    /// What the methods of the test interface share with the test: the calls `Park` and `Hold` keep, and how
    /// they ended.
    final class Methods: Sendable {
        let parkEnds = Mutex<[ParkEnd]>([])
        private let releases: AsyncStream<Void>
        private let release: AsyncStream<Void>.Continuation
        /// `Hold` calls' values and replies, in the order the calls came.
        let held = Mutex<[(value: String, reply: VarlinkPromisedReply)]>([])

        init() {
            (self.releases, self.release) = AsyncStream.makeStream()
        }

        /// Lets the parked `Park` call give its final reply.
        func releasePark() { self.release.yield() }

        /// Waits until the test releases the call, or the call is cancelled (which ends the stream's iteration).
        func parkUntilReleased() async -> ParkEnd {
            var releases = self.releases.makeAsyncIterator()
            return await releases.next() == nil ? .cancelled : .released
        }

        /// Answers the held call whose value is `value`.
        func answer(_ value: String) {
            let reply = self.held.withLock { held in held.first { $0.value == value }?.reply }
            reply?.succeed(["value": .string(value)])
        }

        var interface: VarlinkInterface {
            VarlinkInterface(
                text: """
                    interface org.example.test
                    method Echo(value: string) -> (value: string)
                    method Count(n: int) -> (i: int)
                    method Park() -> (i: int)
                    method Hold(value: string) -> (value: string)
                    """,
                methods: [
                    "Echo": .immediate { request in ["value": .string(try request.string("value"))] },
                    "Count": .streaming { request, responder in
                        guard responder.streams else { throw VarlinkError.expectedMore }
                        let n = request.call.parameters["n"]?.intValue ?? 0
                        for i in 0..<n { responder.send(["i": .int(i)]) }
                        responder.finish(["i": .int(n)])
                    },
                    // Streams one reply, then waits for the test's release (final reply i=2) or its cancellation.
                    "Park": .streaming { _, responder in
                        responder.send(["i": 1])
                        let end = await self.parkUntilReleased()
                        self.parkEnds.withLock { $0.append(end) }
                        if end == .released { responder.finish(["i": 2]) }
                    },
                    // Answered by the test, in the order it chooses.
                    "Hold": .deferred { request, reply in
                        let value = try request.string("value")
                        self.held.withLock { $0.append((value, reply)) }
                    },
                ]
            )
        }
    }

    /// The peer's end of a connection served by a ``VarlinkConnectionHandler``.
    struct Peer {
        let channel: NIOAsyncTestingChannel
        let statistics: VarlinkServerStatistics

        /// Hands `text` to the handler as one read.
        func send(_ text: String) async throws {
            try await self.channel.writeInbound(self.channel.allocator.buffer(string: text))
        }

        /// The writes the handler made since the last look, each as its text.
        func writes() async throws -> [String] {
            var writes: [String] = []
            while let buffer = try await self.channel.readOutbound(as: ByteBuffer.self) {
                writes.append(String(buffer: buffer))
            }
            return writes
        }

        /// The writes of the next `count` replies, once they have all been written (a stream's replies come from
        /// its task, on the loop, a moment later). The deadline is the suite's usual one: with the whole suite
        /// running on two cores, the task that writes them can wait seconds for a thread of the concurrency pool.
        func writes(replies count: Int) async throws -> [String] {
            var writes: [String] = []
            return try await waitUntil("\(count) replies (came: \(writes))", timeout: .seconds(60)) {
                writes += try await self.writes()
                return writes.joined().utf8.count(where: { $0 == 0 }) >= count ? writes : nil
            }
        }

        /// Makes the channel take no more writes (or take them again), as its write buffer passing its bounds (or
        /// draining) does, and tells the handler so.
        func setWritable(_ writable: Bool) async throws {
            self.channel.isWritable = writable
            let channel = self.channel
            try await channel.testingEventLoop.executeInContext { channel.pipeline.fireChannelWritabilityChanged() }
        }

        /// Whether the handler reads from the peer (the last `autoRead` it set; a channel starts reading).
        var reading: Bool {
            self.channel.options.first { $0.option is ChannelOptions.Types.AutoReadOption }?.value as? Bool ?? true
        }
    }

    /// Serves the test interface on a connected testing channel for the duration of `body`, with the server's
    /// streaming calls running as they do under ``VarlinkServer/run()``.
    func withPeer(
        limits: VarlinkServerLimits = VarlinkServerLimits(),
        methods: Methods = Methods(),
        _ body: (Peer) async throws -> Void
    ) async throws {
        let calls = VarlinkCalls()
        let statistics = VarlinkServerStatistics()
        let service = VarlinkService(
            info: VarlinkServiceInfo(vendor: "v", product: "p", version: "1", url: "u"),
            interfaces: [methods.interface],
            protocolErrorInterface: Self.protocolErrors
        )
        let channel = try await NIOAsyncTestingChannel { channel in
            try channel.pipeline.syncOperations.addHandler(
                VarlinkConnectionHandler(
                    service: service,
                    statistics: statistics,
                    calls: calls,
                    limits: limits,
                    peer: nil,
                    logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
                )
            )
        }
        // Connected, as an accepted connection is when its handler is added.
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/run/test.sock")).get()
        async let running: Void = calls.run()
        let peer = Peer(channel: channel, statistics: statistics)
        var failure: (any Error)?
        do {
            try await body(peer)
        } catch {
            failure = error
        }
        if channel.isActive { try await channel.close().get() }
        calls.finish()
        await running
        // Every call has ended, and what it wrote is through the loop: the test has seen every write.
        await channel.testingEventLoop.run()
        #expect(try await peer.writes() == [], "written after the test's last look")
        if let failure { throw failure }
    }

    /// A call of `Echo` as the peer sends it, NUL included.
    static func echo(_ value: String) -> String {
        #"{"method":"org.example.test.Echo","parameters":{"value":"\#(value)"}}"# + "\0"
    }

    /// `replies` as the handler writes them, each ended by its NUL.
    static func frames(_ replies: VarlinkReply...) -> String {
        var bytes: [UInt8] = []
        for reply in replies { reply.writeFrame(to: &bytes) }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Framing

    @Test func aCallIsAnsweredWithItsReplyInOneWrite() async throws {
        try await self.withPeer { peer in
            try await peer.send(Self.echo("hi"))
            #expect(try await peer.writes() == [#"{"parameters":{"value":"hi"}}"# + "\0"])
            #expect(peer.statistics.snapshot.calls == 1)
        }
    }

    @Test func twoCallsInOneReadAreAnsweredInOneWrite() async throws {
        try await self.withPeer { peer in
            try await peer.send(Self.echo("a") + Self.echo("b"))
            let replies = #"{"parameters":{"value":"a"}}"# + "\0" + #"{"parameters":{"value":"b"}}"# + "\0"
            #expect(try await peer.writes() == [replies])
        }
    }

    /// A message is its bytes up to its NUL: a whole JSON object without one is not a call yet.
    @Test func aMessageIsTakenOnlyOnceItsNULArrives() async throws {
        try await self.withPeer { peer in
            let call = Self.echo("late")
            try await peer.send(String(call.dropLast()))
            #expect(try await peer.writes() == [])
            #expect(peer.statistics.snapshot.calls == 0)
            try await peer.send("\0")
            #expect(try await peer.writes() == [#"{"parameters":{"value":"late"}}"# + "\0"])
        }
    }

    @Test func aCallDripFedByteByByteIsAnsweredOnceWhole() async throws {
        try await self.withPeer { peer in
            let call = Array(Self.echo("drip").utf8)
            for byte in call.dropLast() {
                try await peer.send(String(decoding: [byte], as: UTF8.self))
                #expect(try await peer.writes() == [], "nothing before the NUL")
            }
            try await peer.send("\0")
            #expect(try await peer.writes() == [#"{"parameters":{"value":"drip"}}"# + "\0"])
        }
    }

    /// Two calls cut into two reads at every point: whatever the cut, each call is answered once, in order, with
    /// the replies of a read in one write.
    @Test func twoCallsCutAnywhereAreEachAnsweredOnceInOrder() async throws {
        let stream = Array((Self.echo("first") + Self.echo("second")).utf8)
        let firstEnd = Self.echo("first").utf8.count
        let first = #"{"parameters":{"value":"first"}}"# + "\0"
        let second = #"{"parameters":{"value":"second"}}"# + "\0"
        for cut in 0...stream.count {
            try await self.withPeer { peer in
                // A socket never reads nothing: an empty piece is not sent.
                if cut > 0 { try await peer.send(String(decoding: stream[..<cut], as: UTF8.self)) }
                let before = try await peer.writes()
                if cut < stream.count { try await peer.send(String(decoding: stream[cut...], as: UTF8.self)) }
                let after = try await peer.writes()
                switch cut {
                case ..<firstEnd: #expect(before == [] && after == [first + second], "cut at \(cut)")
                case firstEnd..<stream.count: #expect(before == [first] && after == [second], "cut at \(cut)")
                default: #expect(before == [first + second] && after == [], "cut at \(cut)")
                }
            }
        }
    }

    // MARK: Streaming

    @Test func aCallWithMoreGetsEveryReplyThenOneThatDoesNotContinue() async throws {
        try await self.withPeer { peer in
            try await peer.send(#"{"method":"org.example.test.Count","parameters":{"n":3},"more":true}"# + "\0")
            // One write a reply: each is sent as the method gives it.
            #expect(
                try await peer.writes(replies: 4) == [
                    #"{"continues":true,"parameters":{"i":0}}"#, #"{"continues":true,"parameters":{"i":1}}"#,
                    #"{"continues":true,"parameters":{"i":2}}"#, #"{"parameters":{"i":3}}"#,
                ].map { $0 + "\0" }
            )
            // The stream has ended: the connection takes the next call (and nothing more of the stream comes, as
            // the end of every test checks).
            try await peer.send(Self.echo("next"))
            #expect(try await peer.writes(replies: 1) == [#"{"parameters":{"value":"next"}}"# + "\0"])
        }
    }

    @Test func aStreamingMethodCalledWithoutMoreAnswersExpectedMore() async throws {
        try await self.withPeer { peer in
            try await peer.send(#"{"method":"org.example.test.Count","parameters":{"n":3}}"# + "\0")
            #expect(try await peer.writes(replies: 1) == [Self.frames(VarlinkReply(error: VarlinkError.expectedMore))])
        }
    }

    /// The peer hangs up while a stream's producer waits: the producer is cancelled, and the call queued behind it
    /// is never answered.
    @Test func aHangUpCancelsTheStreamsProducer() async throws {
        let methods = Methods()
        try await self.withPeer(methods: methods) { peer in
            try await peer.send(#"{"method":"org.example.test.Park","more":true}"# + "\0")
            #expect(try await peer.writes(replies: 1) == [#"{"continues":true,"parameters":{"i":1}}"# + "\0"])
            try await peer.send(Self.echo("behind"))
            #expect(try await peer.writes() == [], "queued behind the running stream")
            try await peer.channel.close().get()
            try await waitUntil("the producer to end") { !methods.parkEnds.withLock { $0.isEmpty } }
            #expect(methods.parkEnds.withLock { $0 } == [.cancelled])
            #expect(peer.statistics.snapshot.calls == 1, "the call behind the stream never ran")
        }
    }

    // MARK: Bounds

    /// Calls that come while a stream runs wait in a queue; once it is full, the handler stops reading, and reads
    /// again once the stream has ended and the queue been answered.
    @Test func aFullQueueBehindAStreamStopsReadingUntilItIsAnswered() async throws {
        let methods = Methods()
        try await self.withPeer(limits: VarlinkServerLimits(maximumQueuedCalls: 2), methods: methods) { peer in
            try await peer.send(#"{"method":"org.example.test.Park","more":true}"# + "\0")
            #expect(try await peer.writes(replies: 1) == [#"{"continues":true,"parameters":{"i":1}}"# + "\0"])
            try await peer.send(Self.echo("a"))
            #expect(peer.reading)
            try await peer.send(Self.echo("b"))
            #expect(!peer.reading, "two calls queued")
            methods.releasePark()
            // The stream's last reply, then the queue's replies together, as one read's would be.
            #expect(
                try await peer.writes(replies: 3) == [
                    #"{"parameters":{"i":2}}"# + "\0",
                    #"{"parameters":{"value":"a"}}"# + "\0" + #"{"parameters":{"value":"b"}}"# + "\0",
                ]
            )
            #expect(peer.reading)
            #expect(methods.parkEnds.withLock { $0 } == [.released])
        }
    }

    /// Deferred calls answered out of order are answered to the peer in call order; while as many are in flight
    /// as the bound allows, the handler stops reading.
    @Test func deferredCallsAnsweredOutOfOrderGoOutInCallOrderAndBoundWhatIsRead() async throws {
        let methods = Methods()
        try await self.withPeer(limits: VarlinkServerLimits(maximumConcurrentCalls: 2), methods: methods) { peer in
            let hold = { (value: String) in
                #"{"method":"org.example.test.Hold","parameters":{"value":"\#(value)"}}"# + "\0"
            }
            try await peer.send(hold("a"))
            #expect(peer.reading)
            try await peer.send(hold("b"))
            #expect(!peer.reading, "two calls in flight")
            methods.answer("b")
            await peer.channel.testingEventLoop.run()
            #expect(try await peer.writes() == [], "b waits for a")
            methods.answer("a")
            #expect(
                try await peer.writes(replies: 2)
                    == [#"{"parameters":{"value":"a"}}"# + "\0" + #"{"parameters":{"value":"b"}}"# + "\0"]
            )
            #expect(peer.reading)
        }
    }

    /// Replies the peer has not read, past the channel's write buffer bound, stop the reading until they drain.
    @Test func anUnwritableChannelStopsReadingUntilItDrains() async throws {
        try await self.withPeer { peer in
            try await peer.setWritable(false)
            #expect(!peer.reading)
            try await peer.setWritable(true)
            #expect(peer.reading)
        }
    }

    // MARK: Admission of messages

    /// A message of exactly the bound is served; one byte more, and the peer is told the bound and hung up on,
    /// after the replies to the calls before it, in the same write.
    @Test func aMessageOverTheBoundIsRefusedAfterTheCallsBeforeIt() async throws {
        let atBound = Self.echo("x")
        let limits = VarlinkServerLimits(maximumMessageSize: atBound.utf8.count - 1)
        try await self.withPeer(limits: limits) { peer in
            try await peer.send(atBound)
            #expect(try await peer.writes() == [#"{"parameters":{"value":"x"}}"# + "\0"])
            try await peer.send(Self.echo("y") + Self.echo("xx") + Self.echo("never"))
            #expect(
                try await peer.writes() == [
                    #"{"parameters":{"value":"y"}}"# + "\0"
                        + Self.frames(
                            VarlinkReply(
                                error: VarlinkProtocolError.messageTooLarge(limit: limits.maximumMessageSize)
                                    .varlinkError(in: Self.protocolErrors)
                            )
                        )
                ]
            )
            try await waitUntil("the connection to close", timeout: .seconds(60)) { !peer.channel.isActive }
            #expect(peer.statistics.snapshot.protocolErrors == 1)
            #expect(peer.statistics.snapshot.calls == 2)
        }
    }

    /// A message that is not Varlink is refused with InvalidMessage, and the connection closed.
    @Test func aMessageThatIsNotACallIsRefusedAndTheConnectionClosed() async throws {
        try await self.withPeer { peer in
            // The parser's own words for what is wrong, in the protocol's error.
            let invalid = try #require(
                #expect(throws: VarlinkProtocolError.self) { try VarlinkCall(json: Array("not json".utf8)) }
            )
            try await peer.send("not json\0")
            let refusal = VarlinkReply(error: invalid.varlinkError(in: Self.protocolErrors))
            #expect(try await peer.writes() == [Self.frames(refusal)])
            try await waitUntil("the connection to close", timeout: .seconds(60)) { !peer.channel.isActive }
            #expect(peer.statistics.snapshot.protocolErrors == 1)
        }
    }

    /// A call to no method, to no interface, or asking for an upgrade is answered with the Varlink error, and the
    /// connection goes on.
    @Test func aCallToNoMethodIsAnsweredWithTheVarlinkErrorAndTheConnectionStays() async throws {
        try await self.withPeer { peer in
            try await peer.send(
                #"{"method":"org.example.test.Nope"}"# + "\0" + #"{"method":"org.example.nope.Echo"}"# + "\0"
                    + #"{"method":"org.example.test.Echo","parameters":{"value":"up"},"upgrade":true}"# + "\0"
                    + Self.echo("still")
            )
            #expect(
                try await peer.writes() == [
                    Self.frames(
                        VarlinkReply(error: VarlinkError.methodNotFound("org.example.test.Nope")),
                        VarlinkReply(error: VarlinkError.interfaceNotFound("org.example.nope")),
                        VarlinkReply(
                            error: VarlinkProtocolError.upgradeNotSupported(method: "org.example.test.Echo")
                                .varlinkError(in: Self.protocolErrors)
                        ),
                        VarlinkReply(parameters: ["value": "still"])
                    )
                ]
            )
            #expect(peer.channel.isActive)
            #expect(peer.statistics.snapshot.protocolErrors == 0)
        }
    }

    @Test func aOnewayCallIsServedWithoutAReply() async throws {
        try await self.withPeer { peer in
            try await peer.send(
                #"{"method":"org.example.test.Echo","parameters":{"value":"quiet"},"oneway":true}"# + "\0"
                    + Self.echo("loud")
            )
            #expect(try await peer.writes() == [#"{"parameters":{"value":"loud"}}"# + "\0"])
            #expect(peer.statistics.snapshot.calls == 2)
        }
    }
}
