import CoalesceTestSupport
import InMemoryLogging
import Logging
import NIOCore
import Synchronization
import Testing
import Varlink

/// The quotas on connections, the clock on unfinished messages and the rate-limited log of refusals, on the real
/// server. The test's connections are all root's: which of them count as privileged is the test's choice.
extension ServerTests {
    /// The reply a refused connection reads.
    static func refusal(_ quota: VarlinkConnectionQuota) -> VarlinkReply {
        VarlinkReply(error: VarlinkProtocolError.tooManyConnections(quota).varlinkError(in: Self.protocolErrors))
    }

    /// A connection the server has accepted and served once.
    static func served(_ path: String) throws -> VarlinkClient {
        let client = try testClient(path, timeout: .seconds(10))
        _ = try client.call("org.example.test.Echo", ["value": "in"])
        return client
    }

    @Test func aUserPastItsQuotaIsRefusedAndServedOnceItsConnectionsClose() async throws {
        let limits = VarlinkServerLimits(maximumConnections: 10, maximumConnectionsPerUser: 2, reservedConnections: 0)
        try await self.withServer(limits: limits, isPrivileged: { _ in false }) { path, server in
            var first: VarlinkClient? = try Self.served(path)
            let second = try Self.served(path)
            let third = try testClient(path, timeout: .seconds(10))
            #expect(try third.receiveReply() == Self.refusal(.connectionsPerUser(limit: 2)))
            #expect(third.waitForClose(timeout: .seconds(10)))
            #expect(server.statistics.snapshot.connectionsRefused == 1)
            _ = first
            first = nil
            try waitUntil("the first connection to be counted out") { server.statistics.snapshot.connections == 1 }
            _ = try Self.served(path)
            _ = second
        }
    }

    @Test func theReserveIsKeptForPrivilegedPeers() async throws {
        let privileged = Mutex(false)
        let limits = VarlinkServerLimits(maximumConnections: 3, maximumConnectionsPerUser: 10, reservedConnections: 1)
        try await self.withServer(limits: limits, isPrivileged: { _ in privileged.withLock { $0 } }) { path, _ in
            let held = try [Self.served(path), Self.served(path)]
            let refused = try testClient(path, timeout: .seconds(10))
            #expect(try refused.receiveReply() == Self.refusal(.connections(limit: 2)))
            // The per-uid quota does not bind a privileged peer, and the reserve is its own.
            privileged.withLock { $0 = true }
            let admin = try Self.served(path)
            let over = try testClient(path, timeout: .seconds(10))
            #expect(try over.receiveReply() == Self.refusal(.connections(limit: 3)))
            _ = (held, admin)
        }
    }

    @Test func refusalsAreLoggedABurstAtATimeThenCounted() async throws {
        let log = InMemoryLogHandler()
        let limits = VarlinkServerLimits(
            maximumConnections: 10,
            maximumConnectionsPerUser: 1,
            reservedConnections: 0,
            refusalLogBurst: 2,
            // Long enough that the five refusals below fall in one interval however loaded the machine is.
            refusalLogInterval: .seconds(5)
        )
        let logger = Logger(label: "test", factory: { _ in log })
        try await self.withServer(limits: limits, isPrivileged: { _ in false }, logger: logger) { path, _ in
            let held = try Self.served(path)
            for _ in 0..<5 {
                let refused = try testClient(path, timeout: .seconds(10))
                #expect(try refused.receiveReply() == Self.refusal(.connectionsPerUser(limit: 1)))
            }
            let counted = try waitUntil("the count of refusals left out of the log", timeout: .seconds(20)) {
                log.entries.first { $0.message == "Refused more connections than were logged" }
            }
            #expect(counted.metadata["suppressed"] == "3")
            let logged = log.entries.filter { $0.message == "Refusing a connection" }
            #expect(logged.count == 2)
            #expect(logged.first?.metadata["quota"] == "MaxConnectionsPerUser")
            _ = held
        }
    }

    @Test func aMessageLeftUnfinishedClosesItsConnectionAndAQuietOneStays() async throws {
        let limits = VarlinkServerLimits(incompleteMessageTimeout: .milliseconds(200))
        try await self.withServer(limits: limits) { path, server in
            let quiet = try Self.served(path)
            let half = try testClient(path, timeout: .seconds(10))
            try half.sendRaw(Array(#"{"method":"org.example.test.Ech"#.utf8))
            #expect(half.waitForClose(timeout: .seconds(10)))
            #expect(server.statistics.snapshot.connectionsTimedOut == 1)
            // Bytes that keep coming do not keep an unfinished message alive: the clock runs from its start.
            let dripping = try testClient(path, timeout: .seconds(10))
            var closed = false
            for byte in Array(#"{"method":"org.example.test.Echo","parameters":{"value":""#.utf8).cycled(200) {
                do {
                    try dripping.sendRaw([byte])
                } catch {
                    closed = true
                    break
                }
                // The pace of the drip: a byte each 20 ms, or the close.
                if dripping.waitForClose(timeout: .milliseconds(20)) {
                    closed = true
                    break
                }
            }
            #expect(closed)
            #expect(server.statistics.snapshot.connectionsTimedOut == 2)
            // Quiet between messages all along, and served.
            #expect(try quiet.call("org.example.test.Echo", ["value": "still"]) == ["value": "still"])
        }
    }
}

extension Array {
    /// The elements over and over, `count` in all.
    fileprivate func cycled(_ count: Int) -> [Element] {
        (0..<count).map { self[$0 % self.count] }
    }
}

@Suite struct LogRateLimitTests {
    static func at(_ seconds: Double) -> NIODeadline { .uptimeNanoseconds(UInt64(seconds * 1e9)) }

    @Test func aBurstIsLoggedThenTheRestCountedTillTheIntervalEnds() {
        var limit = VarlinkLogRateLimit(interval: .seconds(10), burst: 2)
        #expect(limit.entry(now: Self.at(100)) == .log)
        #expect(limit.entry(now: Self.at(101)) == .log)
        #expect(limit.entry(now: Self.at(102)) == .suppressFirst(reportAt: Self.at(110)))
        #expect(limit.entry(now: Self.at(103)) == .suppress)
        #expect(limit.takeSuppressed() == 2)
        #expect(limit.takeSuppressed() == 0)
        // A new interval starts with the first entry after the last one ended.
        #expect(limit.entry(now: Self.at(110)) == .log)
        #expect(limit.entry(now: Self.at(115)) == .log)
        #expect(limit.entry(now: Self.at(119)) == .suppressFirst(reportAt: Self.at(120)))
        #expect(limit.entry(now: Self.at(130)) == .log)
    }
}
