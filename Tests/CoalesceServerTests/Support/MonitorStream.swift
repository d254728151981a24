@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing
@testable import Varlink

/// A Monitor call on a manager in process (``AppManager/monitor(_:responder:)``), as `io.coalesced.System.Monitor`
/// makes it from its parameters (``MonitorFilter``): its stream is an `NIOAsyncTestingChannel` that the test reads.
/// It reads the records sent as `(name, record)` (``records()``, ``read(until:)``) and the error that ended the
/// stream (``ended``), and hangs up (``hangUp()``) as a client that closes its connection does.
///
/// A monitor started not reading (``start(_:on:loop:reading:)``) is a client that stops reading: what it is sent is
/// handed to the channel and stays unwritten (``UnreadWrites``), counted against the monitor's bound, until
/// ``resumeReading()``.
final class MonitorStream: Sendable {
    typealias Record = (name: String, record: JSONValue)

    /// What the stream sent, as read.
    private struct Reading {
        var records: [(name: String, record: JSONValue)] = []
        /// The error reply that ended the stream, with its parameters.
        var ended: (error: String, parameters: JSONValue)?
    }

    let channel: NIOAsyncTestingChannel
    let loop: NIOAsyncTestingEventLoop
    private let call: Task<Void, any Error>
    /// What holds the replies of a monitor started not reading.
    private let unread: UnreadWrites?
    private let reading = TestMutex(Reading())

    /// Starts a monitor of `filter` on `manager`, and waits (bounded) for its first reply, which says it is in place:
    /// a record decided after this returns reaches it. Unless `reading`, the replies after that first one stay
    /// unwritten until ``resumeReading()``.
    static func start(
        _ filter: MonitorFilter, on manager: AppManager, loop: NIOAsyncTestingEventLoop, reading: Bool = true
    ) async throws -> MonitorStream {
        let channel = NIOAsyncTestingChannel(loop: loop)
        // An address in memory only: the testing channel connects to nothing.
        try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/coalesced-test/monitor")).get()
        let unread = reading ? nil : UnreadWrites()
        if let unread { try await channel.pipeline.addHandler(unread).get() }
        let responder = VarlinkResponder(
            channel: channel, call: VarlinkCall(method: "io.coalesced.System.Monitor", more: true)
        )
        let call = Task { try await manager.monitor(filter, responder: responder) }
        let monitor = MonitorStream(channel: channel, loop: loop, call: call, unread: unread)
        let first = try await waitUntil("the monitor's first reply") { () async throws -> JSONValue? in
            try await monitor.replies().first
        }
        // The first reply was read: the client stops reading after it.
        if let unread { try await loop.executeInContext { unread.hold() } }
        guard first["continues"]?.boolValue == true, first["error"] == nil,
            first["parameters"]?.objectValue?.allSatisfy({ $0.value == .null }) ?? true
        else { throw SupportError("the monitor did not start: \(first.jsonText)") }
        return monitor
    }

    private init(
        channel: NIOAsyncTestingChannel, loop: NIOAsyncTestingEventLoop, call: Task<Void, any Error>, unread: UnreadWrites?
    ) {
        self.channel = channel
        self.loop = loop
        self.call = call
        self.unread = unread
    }

    /// A monitor started not reading reads again: what it was sent and left unwritten is written, in order, and
    /// what comes later goes straight through.
    func resumeReading() async throws {
        guard let unread = self.unread else { return }
        try await self.loop.executeInContext { unread.release() }
    }

    /// Every reply written since the last read, in order (the loop's due work run first).
    private func replies() async throws -> [JSONValue] {
        await self.loop.run()
        var replies: [JSONValue] = []
        while let buffer = try await self.channel.readOutbound(as: ByteBuffer.self) {
            for frame in buffer.readableBytesView.split(separator: 0) {
                replies.append(try JSONParser.parse(String(decoding: frame, as: UTF8.self)))
            }
        }
        return replies
    }

    /// The records sent since the last read, in order; an error reply ends the stream (``ended``) and is no record.
    /// A reply of other than one record fails the test.
    @discardableResult
    func records() async throws -> [Record] {
        var records: [Record] = []
        for reply in try await self.replies() {
            if let error = reply["error"]?.stringValue {
                self.reading.withLock { $0.ended = (error, reply["parameters"] ?? .object([:])) }
                continue
            }
            let members = (reply["parameters"]?.objectValue ?? [:]).filter { $0.value != .null }
            guard members.count == 1, let member = members.first else {
                Issue.record("a monitor's reply with other than one record: \(reply.jsonText)")
                continue
            }
            records.append((member.key, member.value))
        }
        self.reading.withLock { $0.records += records }
        return records
    }

    /// Reads until `condition` holds of every record read so far, waiting (bounded) as they come; returns them all.
    @discardableResult
    func read(until condition: ([Record]) -> Bool) async throws -> [Record] {
        try await waitUntil("the monitor's records (\(self.all.count) so far)") { () async throws -> Bool in
            try await self.records()
            return condition(self.all)
        }
        return self.all
    }

    /// Every record read so far, in order.
    var all: [Record] { self.reading.withLock { $0.records } }

    /// The error reply that ended the stream, once read.
    var ended: (error: String, parameters: JSONValue)? { self.reading.withLock { $0.ended } }

    /// A record without its time, as one line: `post {"app":…}`.
    static func line(_ entry: Record) -> String {
        var record = entry.record.objectValue ?? [:]
        record["time"] = nil
        return "\(entry.name) \(JSONValue.object(record).jsonText)"
    }

    /// The client goes away: the call is cancelled, as closing its connection does, and returns.
    func hangUp() async throws {
        self.call.cancel()
        try await self.call.value
    }
}

/// Writes held as a peer that stops reading leaves them with the server: from ``hold()``, handed to the channel and
/// not written (their promises unfulfilled, so the responder counts them as its backlog) until ``release()``. Used on
/// the channel's loop only.
final class UnreadWrites: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var held: [(data: NIOAny, promise: EventLoopPromise<Void>?)] = []
    private var holding = false
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard self.holding else { return context.write(data, promise: promise) }
        self.held.append((data, promise))
    }

    func flush(context: ChannelHandlerContext) {
        if !self.holding { context.flush() }
    }

    /// From now on, writes are held.
    func hold() { self.holding = true }

    /// Writes what was held, in order, and lets what comes next through.
    func release() {
        self.holding = false
        guard let context = self.context else { return }
        let held = self.held
        self.held = []
        for (data, promise) in held { context.write(data, promise: promise) }
        context.flush()
    }
}
