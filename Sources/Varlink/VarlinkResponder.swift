import NIOCore

/// Sends the replies of one streaming call.
///
/// A call made with `more` may receive any number of ``send(_:)`` replies followed by one ``finish(_:)``; a call
/// without it receives exactly one ``finish(_:)``. For a `oneway` call nothing is sent at all.
public struct VarlinkResponder: Sendable {
    private let channel: any Channel
    private let call: VarlinkCall

    init(channel: any Channel, call: VarlinkCall) {
        self.channel = channel
        self.call = call
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// Whether the client accepts several replies.
    public var streams: Bool { self.call.more && !self.call.oneway }

    /// Sends one reply of a stream, with `continues` set.
    /// - Important: Only for calls made with `more`; check ``streams`` or throw `ExpectedMore` first.
    public func send(_ parameters: [String: JSONValue]) {
        precondition(self.call.more, "a streamed reply to \(self.call.method), called without more")
        self.write(VarlinkReply(parameters: parameters, continues: true))
    }

    /// Sends the last (or only) reply.
    public func finish(_ parameters: [String: JSONValue] = [:]) {
        self.write(VarlinkReply(parameters: parameters))
    }

    /// Ends the call with an error reply.
    public func fail(_ error: any VarlinkErrorConvertible) {
        self.write(VarlinkReply(error: error))
    }

    private func write(_ reply: VarlinkReply) {
        guard !self.call.oneway else { return }
        var buffer = self.channel.allocator.buffer(capacity: 256)
        buffer.writeVarlinkMessage(reply.message)
        // A failed write means the peer is gone; the connection handler sees that and cleans up.
        self.channel.writeAndFlush(buffer, promise: nil)
    }
}
