@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing
@testable import Varlink

/// An app attached to a manager in process: its Attach stream is an `NIOAsyncTestingChannel` that the test reads,
/// its process a ``FakeProcess``. It reads what it was sent (``replies()``, ``callbacks()``), acknowledges
/// (``acknowledge()``), and hangs up (``hangUp()``) as a process that exits does. A callback whose `seq` does not
/// go up fails the test.
final class TestApp: Sendable {
    /// What the stream sent, as read.
    struct Reading {
        /// The highest `seq` read so far.
        var lastSequence: UInt64 = 0
        /// Whether the final reply (the stream's end) was read.
        var ended = false
    }

    let name: String
    let manager: AppManager
    let channel: NIOAsyncTestingChannel
    let loop: NIOAsyncTestingEventLoop
    let process: FakeProcess
    private let attach: Task<Void, any Error>
    private let reading = TestMutex(Reading())

    /// Attaches `name`'s process to `manager`, and waits (bounded) until the manager took it: its first reply (the
    /// state it is attached in) is on the channel, unread.
    static func attach(
        _ name: String, to manager: AppManager, loop: NIOAsyncTestingEventLoop, process: FakeProcess, uid: UInt32 = 0
    ) async throws -> TestApp {
        let channel = NIOAsyncTestingChannel(loop: loop)
        // An address in memory only: the testing channel connects to nothing.
        try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/coalesced-test/\(name)")).get()
        let responder = VarlinkResponder(
            channel: channel,
            call: VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(name)], more: true)
        )
        let peer = VarlinkPeer(pid: process.pid, uid: uid, gid: uid, groups: [])
        let failure = AttachFailure()
        let attach = Task {
            do {
                try await manager.attach(name: name, peer: peer, process: process, responder: responder)
            } catch {
                failure.error.withLock { $0 = error }
                throw error
            }
        }
        let app = TestApp(name: name, manager: manager, channel: channel, loop: loop, process: process, attach: attach)
        try await waitUntil("\(name) to be attached") { () async throws -> Bool in
            if let error = failure.error.withLock({ $0 }) { throw error }
            let snapshot = try manager.get(name)
            return snapshot.pid == process.pid && snapshot.attached
        }
        return app
    }

    private init(
        name: String,
        manager: AppManager,
        channel: NIOAsyncTestingChannel,
        loop: NIOAsyncTestingEventLoop,
        process: FakeProcess,
        attach: Task<Void, any Error>
    ) {
        self.name = name
        self.manager = manager
        self.channel = channel
        self.loop = loop
        self.process = process
        self.attach = attach
    }

    /// The app as the manager has it.
    var snapshot: AppManager.Snapshot {
        get throws { try self.manager.get(self.name) }
    }

    var state: AppState {
        get throws { try self.snapshot.state }
    }

    /// Every reply the stream was sent since the last read, in order (the loop's due work run first).
    func replies() async throws -> [JSONValue] {
        await self.loop.run()
        var replies: [JSONValue] = []
        while let buffer = try await self.channel.readOutbound(as: ByteBuffer.self) {
            for frame in buffer.readableBytesView.split(separator: 0) {
                replies.append(try JSONParser.parse(String(decoding: frame, as: UTF8.self)))
            }
        }
        self.reading.withLock { reading in
            for reply in replies {
                if let seq = reply["parameters"]?["callback"]?["seq"]?.intValue {
                    let last = reading.lastSequence
                    #expect(UInt64(seq) > last, "\(self.name): seq \(seq) after \(last)")
                    reading.lastSequence = max(reading.lastSequence, UInt64(seq))
                }
                if reply["continues"]?.boolValue != true { reading.ended = true }
            }
        }
        return replies
    }

    /// The replies the stream sent until at least `count` came, read as they come; waits (bounded) for them.
    func replies(atLeast count: Int) async throws -> [JSONValue] {
        var replies: [JSONValue] = []
        try await waitUntil("\(count) replies to \(self.name) (\(replies.count) so far)") { () async throws -> Bool in
            replies += try await self.replies()
            return replies.count >= count
        }
        return replies
    }

    /// The callbacks and events sent since the last read, in order: each reply's `callback`.
    func callbacks() async throws -> [JSONValue] {
        try await self.replies().compactMap { $0["parameters"]?["callback"] }
    }

    /// The callbacks and events sent since the last read, waiting until there are at least `count` (what is sent on
    /// another thread after the call that caused it returned).
    func callbacks(atLeast count: Int) async throws -> [JSONValue] {
        var sent: [JSONValue] = []
        try await waitUntil("\(count) callbacks of \(self.name) (\(sent.count) so far)") { () async throws -> Bool in
            sent += try await self.callbacks()
            return sent.count >= count
        }
        return sent
    }

    /// The kinds of the callbacks and events sent since the last read, in order.
    func kinds() async throws -> [String] {
        try await self.callbacks().compactMap { $0["kind"]?.stringValue }
    }

    /// What the stream sent since the last read, as the example app prints it: lifecycle callbacks by name
    /// (`didBecomeActive`), scene callbacks by scene and name (`w1 didBecomeActive`), events as
    /// `event KIND count=N payload=JSON` (with ` dropped=N` when a queue dropped some).
    struct Sent: Equatable {
        var callbacks: [String] = []
        var events: [String] = []
    }

    /// What the stream sent since the last read, as the example app prints it.
    func sent() async throws -> Sent {
        var sent = Sent()
        for callback in try await self.callbacks() {
            let kind = callback["kind"]?.stringValue ?? "?"
            if kind.hasPrefix("lifecycle.") {
                sent.callbacks.append(String(kind.dropFirst("lifecycle.".count)))
                continue
            }
            if kind.hasPrefix("scene."), let scene = callback["scene"]?.stringValue {
                sent.callbacks.append("\(scene) \(kind.dropFirst("scene.".count))")
                continue
            }
            let payload = callback["payload"].flatMap { $0 == .null ? nil : $0.jsonText } ?? "-"
            var line = "event \(kind) count=\(callback["count"]?.intValue ?? 0) payload=\(payload)"
            if let dropped = callback["dropped"]?.intValue { line += " dropped=\(dropped)" }
            sent.events.append(line)
        }
        return sent
    }

    /// What the stream sent until at least `count` events came, read as they come; waits (bounded) for them.
    func sent(untilEvents count: Int) async throws -> Sent {
        var sent = Sent()
        try await waitUntil("\(count) events for \(self.name) (\(sent.events.count) so far)") {
            () async throws -> Bool in
            let more = try await self.sent()
            sent.callbacks += more.callbacks
            sent.events += more.events
            return sent.events.count >= count
        }
        return sent
    }

    /// The highest `seq` read so far.
    var lastSequence: UInt64 { self.reading.withLock { $0.lastSequence } }

    /// Whether the stream's final reply was read.
    var ended: Bool { self.reading.withLock { $0.ended } }

    /// Acknowledges everything up to `sequence`, or up to the last read.
    func acknowledge(upTo sequence: UInt64? = nil) throws {
        try self.manager.acknowledge(name: self.name, uid: 0, upTo: sequence ?? self.lastSequence)
    }

    /// The app's process goes away: the stream's call is cancelled, as closing its connection does, and the call
    /// returns.
    func hangUp() async throws {
        self.attach.cancel()
        try await self.finished()
    }

    /// Waits until the Attach call returned (the stream ended); rethrows its error.
    func finished() async throws {
        try await self.attach.value
    }
}

/// How an Attach call failed, for the wait for it to be taken.
private final class AttachFailure: Sendable {
    let error = TestMutex<(any Error)?>(nil)
}
