@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Testing
@testable import Varlink

/// A client's connection to `io.coalesced.App` in process: the daemon's own interface (``AppInterface``) served by
/// the Varlink connection handler on an `NIOAsyncTestingChannel` of its own, as one accepted connection of a peer
/// whose credentials the test chooses. What the client writes is one read of the connection; what comes back is
/// read as the replies' JSON, as a client on the socket reads them: the wire's error names and parameters, its type
/// checks and its payload bound, with no socket and no process. Made by
/// ``withAppClient(_:uid:gid:groups:_:)``.
final class AppClient: Sendable {
    let channel: NIOAsyncTestingChannel

    init(channel: NIOAsyncTestingChannel) {
        self.channel = channel
    }

    /// Writes `calls` as one read of the connection, without waiting for their answers (pipelined).
    func send(_ calls: [VarlinkCall]) async throws {
        var bytes: [UInt8] = []
        for call in calls {
            call.message.write(to: &bytes)
            bytes.append(0)
        }
        var buffer = self.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        try await self.channel.writeInbound(buffer)
    }

    /// Every reply written since the last read, in order.
    private func replies() async throws -> [JSONValue] {
        await self.channel.testingEventLoop.run()
        var replies: [JSONValue] = []
        while let buffer = try await self.channel.readOutbound(as: ByteBuffer.self) {
            for frame in buffer.readableBytesView.split(separator: 0) {
                replies.append(try JSONParser.parse(String(decoding: frame, as: UTF8.self)))
            }
        }
        return replies
    }

    /// The next `count` replies, waiting (bounded) for them as they come: a post is answered once it is on disk.
    func replies(_ count: Int) async throws -> [JSONValue] {
        var replies: [JSONValue] = []
        try await waitUntil("\(count) replies on the App connection (\(replies.count) so far)") {
            () async throws -> Bool in
            replies += try await self.replies()
            return replies.count >= count
        }
        #expect(replies.count == count, "more replies than calls: \(replies.map(\.jsonText))")
        return replies
    }

    /// Calls `method` of `io.coalesced.App` and waits for its one reply: its parameters, or the error it was
    /// refused with, as ``VarlinkError`` (its name and parameters as on the wire).
    @discardableResult
    func call(_ method: String, _ parameters: JSONObject = [:]) async throws -> JSONValue {
        try await self.send([VarlinkCall(method: "io.coalesced.App.\(method)", parameters: parameters)])
        let reply = try await self.replies(1)[0]
        if let error = reply["error"]?.stringValue {
            throw VarlinkError(name: error, parameters: reply["parameters"]?.objectValue ?? [:])
        }
        return reply["parameters"] ?? .object([:])
    }

    /// Posts as `io.coalesced.App.Post` and returns its reply's parameters (`delivered`, `recipients`, `refused`).
    @discardableResult
    func post(_ target: String, _ kind: String, _ payload: JSONValue, policy: JSONValue? = nil) async throws -> JSONValue {
        var parameters: JSONObject = ["target": .string(target), "kind": .string(kind), "payload": payload]
        if let policy { parameters["policy"] = policy }
        return try await self.call("Post", parameters)
    }

    /// The answer to each of `posts` to `target`, sent as one read: `delivered=true|false`, or the error's name.
    func post(_ target: String, each posts: [(kind: String, payload: JSONValue)]) async throws -> [String] {
        try await self.send(posts.map { post in
            VarlinkCall(
                method: "io.coalesced.App.Post",
                parameters: ["target": .string(target), "kind": .string(post.kind), "payload": post.payload]
            )
        })
        return try await self.replies(posts.count).map { reply in
            reply["error"]?.stringValue ?? "delivered=\(reply["parameters"]?["delivered"]?.boolValue.map(String.init) ?? "-")"
        }
    }
}

/// Runs `body` with an ``AppClient`` connected to `fixture`'s manager as a peer of `uid` (and `gid`, and
/// supplementary `groups`, as the kernel would report them), then closes the connection and waits for its calls
/// to end.
func withAppClient<T>(
    _ fixture: ManagerFixture,
    uid: UInt32 = 0,
    gid: UInt32? = nil,
    groups: [UInt32] = [],
    _ body: (AppClient) async throws -> T
) async throws -> T {
    let service = VarlinkService(
        info: VarlinkServiceInfo(vendor: "coalesced", product: "coalesced", version: "test", url: "-"),
        interfaces: [
            AppInterface.make(
                apps: fixture.manager, daemon: fixture.daemon,
                refreshes: try RefreshScheduler(apps: fixture.manager, logger: Logger(label: "test", factory: { _ in fixture.logs }))
            ),
            ProtocolInterface.make(),
        ],
        protocolErrorInterface: ProtocolInterface.name
    )
    let calls = VarlinkCalls()
    // A pid no real process has (above Linux's largest): nothing is looked up by it.
    let peer = VarlinkPeer(pid: 1 << 30 - 2, uid: uid, gid: gid ?? uid, groups: groups)
    let channel = try await NIOAsyncTestingChannel { channel in
        try channel.pipeline.syncOperations.addHandler(
            VarlinkConnectionHandler(
                service: service,
                statistics: VarlinkServerStatistics(),
                calls: calls,
                limits: fixture.daemon.serverLimits,
                peer: peer,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        )
    }
    // An address in memory only: the testing channel connects to nothing.
    try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/coalesced-test/app-client")).get()
    // The connection's streaming calls (Register) run as the server runs them: children of one task.
    async let running: Void = calls.run()
    let result: Result<T, any Error>
    do {
        result = .success(try await body(AppClient(channel: channel)))
    } catch {
        result = .failure(error)
    }
    if channel.isActive { try? await channel.close().get() }  // closed by the handler after a protocol error
    calls.finish()
    await running
    return try result.get()
}

/// How `body` was refused: its error as a client reads it off the wire; `nil` when it was not refused.
func refusal(_ body: () async throws -> Void) async -> VarlinkError? {
    do {
        try await body()
        return nil
    } catch let error as VarlinkError {
        return error
    } catch {
        Issue.record("not a Varlink error: \(error)")
        return nil
    }
}
