import NIOConcurrencyHelpers
import NIOCore

/// Sends the replies of one streaming call.
///
/// A call made with `more` may receive any number of ``send(_:)`` replies followed by one ``finish(_:)`` or
/// ``fail(_:)``; a call without it receives exactly one of those. For a `oneway` call nothing is sent at all.
/// Anything sent after the final reply is dropped, so a peer's replies can never fall out of step with its calls.
public struct VarlinkResponder: Sendable {
    private let channel: any Channel
    private let call: VarlinkCall
    private let finished = NIOLockedValueBox(false)
    /// Bytes handed to the channel that the kernel has not taken yet: what a slow reader makes the daemon hold.
    private let unwritten = NIOLockedValueBox(0)

    init(channel: any Channel, call: VarlinkCall) {
        self.channel = channel
        self.call = call
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// Whether the client accepts several replies.
    public var streams: Bool { self.call.more && !self.call.oneway }

    /// Bytes of replies sent but not yet written to the socket, because the peer does not read them fast enough.
    /// A stream that must not grow without bound ends the call once this passes its limit.
    public var backlog: Int { self.unwritten.withLockedValue { $0 } }

    /// Whether the final reply has been sent.
    public var isFinished: Bool { self.finished.withLockedValue { $0 } }

    /// Sends one reply of a stream, with `continues` set. For a call made without `more` the method should have
    /// refused with `ExpectedMore`; the call is ended with that error here instead.
    public func send(_ parameters: JSONObject) {
        self.send(all: [parameters])
    }

    /// Sends several replies of a stream at once, in one write: a burst the peer reads in one go.
    public func send(all replies: [JSONObject]) {
        guard self.call.more else {
            self.fail(VarlinkError.expectedMore)
            return
        }
        guard !self.isFinished, !replies.isEmpty else { return }
        self.write(replies.map { VarlinkReply(parameters: $0, continues: true) })
    }

    /// Sends the last (or only) reply.
    public func finish(_ parameters: JSONObject = [:]) {
        self.writeFinal(VarlinkReply(parameters: parameters))
    }

    /// Ends the call with an error reply.
    public func fail(_ error: any VarlinkErrorConvertible) {
        self.writeFinal(VarlinkReply(error: error))
    }

    /// Ends the call with an error reply and closes the connection once it is written: for a peer that stopped
    /// reading, whose unread replies the server should not keep. The peer reads every reply sent before it, then
    /// the error, then the end of the connection; one that reads nothing for ``closeGrace`` is closed without them.
    public func failAndClose(_ error: any VarlinkErrorConvertible) {
        self.fail(error)
        let channel = self.channel
        let unwritten = self.unwritten
        // Queued behind the error reply, like every write of the responder: closed once the peer has read up to
        // it. Nothing more is added (the call is finished), so what the server holds meanwhile is what the peer
        // left unread.
        channel.eventLoop.execute {
            channel.writeAndFlush(channel.allocator.buffer(capacity: 0)).whenComplete { _ in channel.close(promise: nil) }
            Self.closeUnlessRead(channel, unwritten, since: unwritten.withLockedValue { $0 })
        }
    }

    /// How long a peer ended by ``failAndClose(_:)`` may read nothing before its connection is closed, what it was
    /// sent unread: a reader that pauses gets every reply, one that never reads is not kept for good.
    static let closeGrace = TimeAmount.minutes(2)

    /// Closes `channel` after ``closeGrace`` unless the peer has read some of its replies meanwhile (fewer bytes
    /// unwritten than `since`); then waits again.
    private static func closeUnlessRead(_ channel: any Channel, _ unwritten: NIOLockedValueBox<Int>, since: Int) {
        channel.eventLoop.scheduleTask(in: Self.closeGrace) {
            let now = unwritten.withLockedValue { $0 }
            guard channel.isActive else { return }
            if now < since {
                Self.closeUnlessRead(channel, unwritten, since: now)
            } else {
                channel.close(promise: nil)
            }
        }
    }

    private func writeFinal(_ reply: VarlinkReply) {
        let first = self.finished.withLockedValue { finished in
            defer { finished = true }
            return !finished
        }
        if first { self.write([reply]) }
    }

    private func write(_ replies: [VarlinkReply]) {
        guard !self.call.oneway else { return }
        var bytes: [UInt8] = []
        for reply in replies { reply.writeFrame(to: &bytes) }
        let buffer = self.channel.allocator.buffer(bytes: bytes)
        let size = buffer.readableBytes
        self.unwritten.withLockedValue { $0 += size }
        let unwritten = self.unwritten
        // Always through the event loop's task queue, even from the loop itself: NIO writes at once on the loop but
        // queues a write from another thread, so mixing the two would let a later reply overtake an earlier one.
        // One queue keeps the order the callers sent in. A failed write means the peer is gone; the connection
        // handler sees that and cleans up.
        let channel = self.channel
        let message = buffer
        channel.eventLoop.execute {
            channel.writeAndFlush(message).whenComplete { _ in unwritten.withLockedValue { $0 -= size } }
        }
    }
}
