import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Serves the calls of one connection, one at a time and in order, as Varlink requires.
///
/// Immediate methods answer on the event loop and their replies are flushed once per read, so pipelined calls
/// cost one write. A streaming method runs as a task; what arrives meanwhile waits in a bounded queue, a protocol
/// violation included, so that every earlier call is answered before the connection is refused. The handler stops
/// reading from the peer while that queue is full, and while replies the peer has not read pile up past the
/// channel's write buffer bound, so a client that sends without reading cannot make the daemon hold more than
/// those bounds.
final class VarlinkConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        /// Ready for the next call.
        case idle
        /// A streaming call is running as `task`; later input waits in `queue`.
        case running(task: Task<Void, Never>)
        /// Deferred calls are still owed replies and what came next must wait for them (a streaming call, a
        /// refusal); later input waits in `queue`.
        case waitingForReplies
        /// The connection is being closed; nothing more is read or answered.
        case closing
    }

    /// Input waiting for the running call to finish.
    private enum Pending {
        case call(VarlinkCall, size: Int)
        case refusal(VarlinkProtocolError)
    }

    private let service: VarlinkService
    private let statistics: VarlinkServerStatistics
    private let tasks: VarlinkTaskRegistry
    private let maximumQueuedCalls: Int
    private let logger: Logger
    private var state = State.idle
    private var queue = CircularBuffer<Pending>()
    /// Replies owed to the peer in call order while deferred calls run: `nil` until the call has answered.
    private var owed = CircularBuffer<(id: Int, reply: VarlinkReply?)>()
    /// Deferred calls' replies given on other threads, for the event loop to take in bulk.
    private let answered = NIOLockedValueBox(Answered())

    private struct Answered {
        var replies: [(id: Int, reply: VarlinkReply)] = []
        var scheduled = false
    }
    private var nextOwedID = 0
    private let maximumConcurrentCalls: Int
    private var peer: VarlinkPeer?
    private var peerProcess: VarlinkPeerProcess?
    private var peerGroups: [UInt32]?
    private var pendingFlush = false
    private var reading = true
    /// A protocol violation waits in the queue: nothing more is read.
    private var refusalQueued = false

    init(
        service: VarlinkService,
        statistics: VarlinkServerStatistics,
        tasks: VarlinkTaskRegistry,
        limits: VarlinkServerLimits,
        logger: Logger
    ) {
        self.service = service
        self.statistics = statistics
        self.tasks = tasks
        self.maximumQueuedCalls = limits.maximumQueuedCalls
        self.maximumConcurrentCalls = limits.maximumConcurrentCalls
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        if let provider = context.channel as? any SocketOptionProvider {
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
                .whenSuccess { (credentials: PeerCredentialsLayout) in
                    loopBound.value.peer = VarlinkPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
                }
            // Its supplementary groups; more than the buffer holds (or an old kernel) and the peer has none listed.
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: Self.peerGroupsOption)
                .whenSuccess { (groups: VarlinkPeerGroups) in loopBound.value.peerGroups = groups.groups }
            // A pidfd of the process that connected; older kernels refuse the option and the peer has none.
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: Self.peerPidfdOption)
                .whenSuccess { (descriptor: CInt) in
                    guard descriptor >= 0 else { return }
                    loopBound.value.peerProcess = VarlinkPeerProcess(descriptor: descriptor)
                }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The peer is gone: what it asked for can no longer be answered.
        if case .running(let task) = self.state { task.cancel() }
        self.owed.removeAll()
        self.state = .closing
        self.queue.removeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let pending = Self.parse(Self.unwrapInboundIn(data))
        switch self.state {
        case .idle: self.handle(context: context, pending)
        case .running, .waitingForReplies: self.enqueue(context: context, pending)
        case .closing: break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushPending(context: context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.updateReading(context: context)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let protocolError = error as? VarlinkProtocolError else {
            self.logger.debug("Varlink connection failed, closing", metadata: ["error": "\(error)"])
            self.state = .closing
            context.close(promise: nil)
            return
        }
        switch self.state {
        case .idle where self.owed.isEmpty: self.refuse(context: context, error: protocolError)
        case .idle:
            self.state = .waitingForReplies
            self.enqueue(context: context, .refusal(protocolError))
        case .running, .waitingForReplies: self.enqueue(context: context, .refusal(protocolError))
        case .closing: break
        }
    }

    /// SO_PEERGROUPS (Linux 4.13).
    private static let peerGroupsOption = SocketOptionName(59)

    /// SO_PEERPIDFD (Linux 6.5), which Glibc 2.36's headers do not name yet.
    private static let peerPidfdOption = SocketOptionName(77)

    private static func parse(_ frame: ByteBuffer) -> Pending {
        do {
            return .call(try VarlinkCall(message: try JSONParser.parse(frame.readableBytesView)), size: frame.readableBytes)
        } catch let error as JSONParseError {
            return .refusal(.invalidMessage(error.description))
        } catch let error as VarlinkProtocolError {
            return .refusal(error)
        } catch {
            return .refusal(.invalidMessage("\(error)"))
        }
    }

    private func handle(context: ChannelHandlerContext, _ pending: Pending) {
        switch pending {
        case .call(let call, let size): self.dispatch(context: context, call: call, size: size)
        case .refusal(let error) where self.owed.isEmpty: self.refuse(context: context, error: error)
        case .refusal:
            // Every reply owed comes first.
            self.state = .waitingForReplies
            self.enqueue(context: context, pending)
        }
    }

    private func enqueue(context: ChannelHandlerContext, _ pending: Pending) {
        self.queue.append(pending)
        if case .refusal = pending {
            // Nothing after a protocol violation is read: the connection ends once the queue reaches it.
            self.refusalQueued = true
        }
        self.updateReading(context: context)
    }

    /// Reads from the peer only while its queue has room and its unread replies are within bounds.
    private func updateReading(context: ChannelHandlerContext) {
        let wanted = !self.refusalQueued && self.queue.count < self.maximumQueuedCalls
            && self.owed.count < self.maximumConcurrentCalls && context.channel.isWritable
        guard wanted != self.reading else { return }
        self.reading = wanted
        // Fails only on a closed channel, which reads nothing anyway.
        context.channel.setOption(ChannelOptions.autoRead, value: wanted).whenFailure { _ in }
    }

    /// The peer broke the protocol: say why while a reply can still be sent, then hang up.
    private func refuse(context: ChannelHandlerContext, error: VarlinkProtocolError) {
        self.state = .closing
        self.queue.removeAll()
        self.statistics.update { $0.protocolErrors += 1 }
        self.logger.debug("Varlink peer broke the protocol, closing", metadata: ["reason": "\(error)"])
        var buffer = context.channel.allocator.buffer(capacity: 128)
        buffer.writeVarlinkReply(VarlinkReply(error: error))
        let channel = context.channel
        self.pendingFlush = false
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func dispatch(context: ChannelHandlerContext, call: VarlinkCall, size: Int) {
        var peer = self.peer
        peer?.process = self.peerProcess
        peer?.groups = self.peerGroups
        let request = VarlinkRequest(call: call, peer: peer, messageSize: size)
        let method: VarlinkMethod
        do throws(VarlinkError) {
            if call.upgrade { throw VarlinkError.invalidParameter("upgrade") }
            method = try self.service.method(for: call)
        } catch {
            self.statistics.update { $0.calls += 1 }
            self.reply(context: context, call: call, VarlinkReply(error: error))
            return
        }
        if case .streaming = method, !self.owed.isEmpty {
            // It waits for the deferred calls before it to answer.
            self.state = .waitingForReplies
            self.queue.prepend(.call(call, size: size))
            self.updateReading(context: context)
            return
        }
        self.statistics.update { $0.calls += 1 }
        switch method {
        case .immediate(let body):
            let reply: VarlinkReply
            do {
                reply = VarlinkReply(parameters: try body(request))
            } catch {
                reply = VarlinkReply(error: Self.wireError(error, call: call, logger: self.logger))
            }
            self.reply(context: context, call: call, reply)
        case .deferred(let body):
            let id = self.nextOwedID
            self.nextOwedID += 1
            if !call.oneway { self.owed.append((id, nil)) }
            let logger = self.logger
            let eventLoop = context.eventLoop
            let answered = self.answered
            let deliver = NIOLoopBound({ [self] in self.deliverAnswered(context: context) }, eventLoop: context.eventLoop)
            let promised = VarlinkPromisedReply { result in
                let reply: VarlinkReply
                switch result {
                case .success(let parameters): reply = VarlinkReply(parameters: parameters)
                case .failure(let error): reply = VarlinkReply(error: Self.wireError(error, call: call, logger: logger))
                }
                // Always through the loop's queue, even from the loop: an answer given while the call starts must
                // not re-enter the handler. Answers that come together go over together: one hop, one flush.
                let schedule = answered.withLockedValue { answered in
                    answered.replies.append((id, reply))
                    defer { answered.scheduled = true }
                    return !answered.scheduled
                }
                if schedule { eventLoop.execute { deliver.value() } }
            }
            do {
                try body(request, promised)
            } catch {
                promised.fail(error)
            }
            self.updateReading(context: context)
        case .streaming(let body):
            let responder = VarlinkResponder(channel: context.channel, call: call)
            let finished = NIOLoopBound(
                { [self] in self.streamingCallFinished(context: context) },
                eventLoop: context.eventLoop
            )
            let task = Self.run(body, request: request, responder: responder, tasks: self.tasks, logger: self.logger) {
                finished.value()
            }
            self.state = .running(task: task)
        }
    }

    /// Runs a streaming method as a task that always ends the call with exactly one final reply, then hands
    /// control back to the connection on its event loop.
    private static func run(
        _ body: @escaping @Sendable (VarlinkRequest, VarlinkResponder) async throws -> Void,
        request: VarlinkRequest,
        responder: VarlinkResponder,
        tasks: VarlinkTaskRegistry,
        logger: Logger,
        onLoop finished: @escaping @Sendable () -> Void
    ) -> Task<Void, Never> {
        let eventLoop = responder.eventLoop
        return tasks.start {
            do {
                try await body(request, responder)
                if !responder.isFinished {
                    logger.error("Method returned without a final reply", metadata: ["method": "\(request.call.method)"])
                    responder.fail(
                        VarlinkProtocolError.internalError("\(request.call.method) returned without a final reply")
                    )
                }
            } catch {
                responder.fail(Self.wireError(error, call: request.call, logger: logger))
            }
            eventLoop.execute(finished)
        }
    }

    private func reply(context: ChannelHandlerContext, call: VarlinkCall, _ reply: VarlinkReply) {
        guard !call.oneway else { return }
        guard self.owed.isEmpty else {
            // Behind the replies deferred calls still owe.
            self.owed.append((self.nextOwedID, reply))
            self.nextOwedID += 1
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 256)
        buffer.writeVarlinkReply(reply)
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

    /// Deferred calls answered from other threads since the last time: their replies, then one flush.
    private func deliverAnswered(context: ChannelHandlerContext) {
        let replies = self.answered.withLockedValue { answered in
            defer {
                answered.replies.removeAll(keepingCapacity: true)
                answered.scheduled = false
            }
            return answered.replies
        }
        // Every reply that can go now, in one buffer and one write.
        var bytes: [UInt8] = []
        for (id, reply) in replies { self.settle(id: id, reply: reply, into: &bytes) }
        if !bytes.isEmpty {
            context.write(Self.wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
            self.pendingFlush = true
        }
        self.afterReplies(context: context)
    }

    /// Records a deferred call's reply, and appends the frames of the replies now at the head of the line.
    private func settle(id: Int, reply: VarlinkReply, into bytes: inout [UInt8]) {
        guard let index = self.owed.firstIndex(where: { $0.id == id }) else { return }  // oneway, or closing
        self.owed[index].reply = reply
        while let head = self.owed.first, let ready = head.reply {
            self.owed.removeFirst()
            ready.writeFrame(to: &bytes)
        }
    }

    /// Once replies went out: calls that waited for them start, and what was written is flushed.
    private func afterReplies(context: ChannelHandlerContext) {
        if self.owed.isEmpty, case .waitingForReplies = self.state {
            self.state = .idle
            while case .idle = self.state, self.owed.isEmpty, let next = self.queue.popFirst() {
                self.handle(context: context, next)
            }
        }
        self.flushPending(context: context)
        self.updateReading(context: context)
    }

    private func streamingCallFinished(context: ChannelHandlerContext) {
        guard case .running = self.state else { return }
        self.state = .idle
        while case .idle = self.state, let next = self.queue.popFirst() {
            self.handle(context: context, next)
        }
        self.flushPending(context: context)
        self.updateReading(context: context)
    }

    /// A method's error as the peer sees it. Errors that are not part of an interface are our bugs: they are
    /// logged here, once, and reach the peer as `io.coalesced.Protocol.InternalError`.
    private static func wireError(_ error: any Error, call: VarlinkCall, logger: Logger) -> any VarlinkErrorConvertible
    {
        if let error = error as? any VarlinkErrorConvertible { return error }
        logger.error(
            "Method failed with an undeclared error",
            metadata: ["method": "\(call.method)", "error": "\(error)"]
        )
        return VarlinkProtocolError.internalError("\(error)")
    }
}

/// The layout of Linux's `struct ucred`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
struct PeerCredentialsLayout: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
