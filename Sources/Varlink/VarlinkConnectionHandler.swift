import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Serves the calls of one connection, one at a time and in order, as Varlink requires.
///
/// Immediate methods answer on the event loop and their replies are flushed once per read, so pipelined calls
/// cost one write. A streaming method runs as a task; calls that arrive meanwhile wait in a bounded queue. The
/// handler stops reading from the peer while that queue is full, and while replies the peer has not read pile up
/// past the channel's write buffer bound, so a client that sends without reading cannot make the daemon hold more
/// than those bounds.
final class VarlinkConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        /// Ready for the next call.
        case idle
        /// A streaming call is running; later calls wait in `queue`.
        case running
        /// The connection is being closed; nothing more is read or answered.
        case closing
    }

    private let service: VarlinkService
    private let statistics: VarlinkServerStatistics
    private let maximumQueuedCalls: Int
    private let logger: Logger
    private var state = State.idle
    private var queue = CircularBuffer<VarlinkCall>()
    private var peer: VarlinkPeer?
    private var pendingFlush = false
    private var reading = true

    init(service: VarlinkService, statistics: VarlinkServerStatistics, limits: VarlinkServerLimits, logger: Logger) {
        self.service = service
        self.statistics = statistics
        self.maximumQueuedCalls = limits.maximumQueuedCalls
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        if let provider = context.channel as? any SocketOptionProvider {
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
                .whenSuccess { (credentials: PeerCredentialsLayout) in
                    loopBound.value.peer = VarlinkPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
                }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .idle = self.state else {
            if case .running = self.state {
                self.enqueue(context: context, frame: Self.unwrapInboundIn(data))
            }
            return
        }
        guard let call = self.parse(context: context, frame: Self.unwrapInboundIn(data)) else { return }
        self.dispatch(context: context, call: call)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushPending(context: context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.updateReading(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Reads from the peer only while its queue has room and its unread replies are within bounds.
    private func updateReading(context: ChannelHandlerContext) {
        let wanted = self.queue.count < self.maximumQueuedCalls && context.channel.isWritable
        guard wanted != self.reading else { return }
        self.reading = wanted
        // Fails only on a closed channel, which reads nothing anyway.
        context.channel.setOption(ChannelOptions.autoRead, value: wanted).whenFailure { _ in }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let protocolError = error as? VarlinkProtocolError {
            self.refuse(context: context, error: protocolError)
        } else {
            self.logger.debug("Varlink connection failed, closing", metadata: ["error": "\(error)"])
            self.state = .closing
            context.close(promise: nil)
        }
    }

    private func enqueue(context: ChannelHandlerContext, frame: ByteBuffer) {
        guard let call = self.parse(context: context, frame: frame) else { return }
        self.queue.append(call)
        self.updateReading(context: context)
    }

    private func parse(context: ChannelHandlerContext, frame: ByteBuffer) -> VarlinkCall? {
        do {
            let message = try JSONParser.parse(frame.readableBytesView)
            return try VarlinkCall(message: message)
        } catch let error as JSONParseError {
            self.refuse(context: context, error: .invalidMessage(error.description))
        } catch let error as VarlinkProtocolError {
            self.refuse(context: context, error: error)
        } catch {
            self.refuse(context: context, error: .invalidMessage("\(error)"))
        }
        return nil
    }

    /// The peer broke the protocol: say why while a reply can still be sent, then hang up.
    private func refuse(context: ChannelHandlerContext, error: VarlinkProtocolError) {
        guard case .idle = self.state else {
            if case .running = self.state { self.state = .closing; context.close(promise: nil) }
            return
        }
        self.state = .closing
        self.statistics.update { $0.protocolErrors += 1 }
        self.logger.debug("Varlink peer broke the protocol, closing", metadata: ["reason": "\(error)"])
        var buffer = context.channel.allocator.buffer(capacity: 128)
        buffer.writeVarlinkMessage(VarlinkReply(error: error).message)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func dispatch(context: ChannelHandlerContext, call: VarlinkCall) {
        self.statistics.update { $0.calls += 1 }
        let request = VarlinkRequest(call: call, peer: self.peer)
        let method: VarlinkMethod
        do throws(VarlinkError) {
            if call.upgrade { throw VarlinkError.invalidParameter("upgrade") }
            method = try self.service.method(for: call)
        } catch {
            self.reply(context: context, call: call, VarlinkReply(error: error))
            return
        }
        switch method {
        case .immediate(let body):
            let reply: VarlinkReply
            do {
                reply = VarlinkReply(parameters: try body(request))
            } catch {
                reply = VarlinkReply(error: Self.wireError(error, call: call, logger: self.logger))
            }
            self.reply(context: context, call: call, reply)
        case .streaming(let body):
            self.state = .running
            let responder = VarlinkResponder(channel: context.channel, call: call)
            let finished = NIOLoopBound(
                { [self] in self.streamingCallFinished(context: context) },
                eventLoop: context.eventLoop
            )
            Self.run(body, request: request, responder: responder, logger: self.logger) {
                finished.value()
            }
        }
    }

    /// Runs a streaming method as a task, then hands control back to the connection on its event loop.
    private static func run(
        _ body: @escaping @Sendable (VarlinkRequest, VarlinkResponder) async throws -> Void,
        request: VarlinkRequest,
        responder: VarlinkResponder,
        logger: Logger,
        onLoop finished: @escaping @Sendable () -> Void
    ) {
        let eventLoop = responder.eventLoop
        Task {
            do {
                try await body(request, responder)
            } catch {
                responder.fail(Self.wireError(error, call: request.call, logger: logger))
            }
            eventLoop.execute(finished)
        }
    }

    private func reply(context: ChannelHandlerContext, call: VarlinkCall, _ reply: VarlinkReply) {
        guard !call.oneway else { return }
        var buffer = context.channel.allocator.buffer(capacity: 256)
        buffer.writeVarlinkMessage(reply.message)
        context.write(Self.wrapOutboundOut(buffer), promise: nil)
        self.pendingFlush = true
    }

    // Writability changes only when written bytes are flushed, so check after each flush.
    private func flushPending(context: ChannelHandlerContext) {
        guard self.pendingFlush else { return }
        self.pendingFlush = false
        context.flush()
        self.updateReading(context: context)
    }

    private func streamingCallFinished(context: ChannelHandlerContext) {
        guard case .running = self.state else { return }
        self.state = .idle
        while case .idle = self.state, let next = self.queue.popFirst() {
            self.dispatch(context: context, call: next)
        }
        self.flushPending(context: context)
        self.updateReading(context: context)
    }

    /// A method's error as the peer sees it. Errors that are not part of an interface are our bugs: they are
    /// logged here, once, and reach the peer as `io.coalesced.Protocol.InternalError`.
    private static func wireError(_ error: any Error, call: VarlinkCall, logger: Logger) -> any VarlinkErrorConvertible {
        if let error = error as? any VarlinkErrorConvertible { return error }
        logger.error(
            "Method failed with an undeclared error",
            metadata: ["method": "\(call.method)", "error": "\(error)"]
        )
        return VarlinkError(name: "io.coalesced.Protocol.InternalError", parameters: ["reason": .string("\(error)")])
    }
}

/// The layout of Linux's `struct ucred`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
struct PeerCredentialsLayout: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
