import CoalesceTestSupport
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Varlink

/// The test interface, what its methods share with the tests, and the server that serves it.
extension ServerTests {
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
}
