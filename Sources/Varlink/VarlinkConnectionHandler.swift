import Logging
import NIOCore
import Synchronization

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

    enum State {
        /// Ready for the next call.
        case idle
        /// A streaming call is running in `scope`; later input waits in `queue`.
        case running(scope: VarlinkCallScope)
        /// Deferred calls are still owed replies and what came next must wait for them (a streaming call, a
        /// refusal); later input waits in `queue`.
        case waitingForReplies
        /// The connection is being closed; nothing more is read or answered.
        case closing
    }

    /// Input waiting for the running call to finish.
    enum Pending {
        case call(VarlinkCall, size: Int)
        case refusal(VarlinkProtocolError)
    }

    // The handler's state is read and changed only on its channel's event loop, by its own methods, never across a
    // suspension: the run-time exclusivity check, a thread-local lookup on every access (several per call), guards
    // against nothing here and cost about 1,100 instructions per post.
    let service: VarlinkService
    let statistics: VarlinkServerStatistics
    let calls: VarlinkCalls
    let maximumQueuedCalls: Int
    let logger: Logger
    @exclusivity(unchecked) var state = State.idle
    @exclusivity(unchecked) var queue = CircularBuffer<Pending>()
    /// The calls owed replies, in call order, while deferred calls run.
    @exclusivity(unchecked) var owed = CircularBuffer<Int>()
    /// Replies given before the replies owed ahead of them: they wait here for their turn. Deferred calls mostly
    /// answer in call order, and such a reply goes out at once without being kept. The line holds consecutive ids
    /// (a oneway call takes none).
    @exclusivity(unchecked) var parked: [Int: VarlinkReply] = [:]
    /// The deferred replies the event loop takes from ``answered``: handed over by a swap, so that neither side
    /// allocates for the next ones.
    @exclusivity(unchecked) var taken: [(id: Int, reply: VarlinkReply)] = []
    /// For each call in the line, where its reply is in ``taken`` (-1: not there): to settle them in call order.
    @exclusivity(unchecked) var places: [Int] = []
    /// Deferred calls' replies as they are given; set up once the handler is in a pipeline.
    @exclusivity(unchecked) var answered: VarlinkAnsweredReplies!
    /// Reply frames written since the last flush: a read's replies go to the channel as one buffer.
    @exclusivity(unchecked) var outgoing: [UInt8] = []
    @exclusivity(unchecked) var nextOwedID = 0
    let maximumConcurrentCalls: Int
    /// The method the last call went to: a connection mostly calls one again and again (a producer's posts), and
    /// comparing the name costs less than hashing it for the lookup.
    /// With the parameters it keeps as text, which the next call's parsing asks for before its method is looked up.
    @exclusivity(unchecked) var lastMethod: (name: String, method: VarlinkMethod, keptAsText: [String])?
    /// The strings this peer's calls repeat.
    let strings = JSONStringCache()
    /// Where messages end.
    @exclusivity(unchecked) var decoder: VarlinkFrameDecoder
    /// What was read and not yet split into messages; `nil` when nothing is left over.
    @exclusivity(unchecked) var input: ByteBuffer?
    /// A read is being split into messages.
    @exclusivity(unchecked) var splitting = false
    /// The input broke the protocol: later bytes are dropped.
    @exclusivity(unchecked) var inputRefused = false
    /// Who connected, as the kernel said when the connection was accepted, as each call's request carries it.
    @exclusivity(unchecked) var requestPeer: VarlinkPeer?
    /// How long a message may stay unfinished.
    let incompleteMessageTimeout: TimeAmount
    /// When the unfinished message in ``input`` began; `nil` while the input ends with a whole message.
    @exclusivity(unchecked) var incompleteSince: NIODeadline?
    /// Closes the connection if the message begun at ``incompleteSince`` is not finished in time.
    @exclusivity(unchecked) var incompleteMessageDeadline: Scheduled<Void>?
    /// The channel takes more writes without growing past its bound (as the last writability change said).
    @exclusivity(unchecked) var writable = true
    @exclusivity(unchecked) var pendingFlush = false
    @exclusivity(unchecked) var reading = true
    /// A protocol violation waits in the queue: nothing more is read.
    @exclusivity(unchecked) var refusalQueued = false

    init(
        service: VarlinkService,
        statistics: VarlinkServerStatistics,
        calls: VarlinkCalls,
        limits: VarlinkServerLimits,
        peer: VarlinkPeer?,
        logger: Logger
    ) {
        self.requestPeer = peer
        self.incompleteMessageTimeout = limits.incompleteMessageTimeout.timeAmount
        self.service = service
        self.statistics = statistics
        self.calls = calls
        self.maximumQueuedCalls = limits.maximumQueuedCalls
        self.maximumConcurrentCalls = limits.maximumConcurrentCalls
        self.logger = logger
        self.decoder = VarlinkFrameDecoder(maximumMessageSize: limits.maximumMessageSize)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Weak: the handler holds what it is answered through, and the context holds the handler.
        let deliver = NIOLoopBound(
            { [weak self, weak context] in
                guard let self, let context else { return }
                self.deliverAnswered(context: context)
            },
            eventLoop: context.eventLoop
        )
        self.answered = VarlinkAnsweredReplies(
            eventLoop: context.eventLoop,
            logger: self.logger,
            protocolErrorInterface: self.service.protocolErrorInterface,
            deliver: deliver
        )
    }

    func channelActive(context: ChannelHandlerContext) {
        // The peer's pidfd is taken when a method asks for it, not here: most connections never need it, and each
        // would hold a second descriptor for its lifetime.
        self.requestPeer?.processSource = VarlinkPeerProcessSource(channel: context.channel)
        context.fireChannelActive()
    }

    /// Nothing more is read or answered: a streaming call still running is cancelled now, as the channel's end
    /// would cancel it (``channelInactive(context:)`` finds the state closing and cancels nothing).
    func beginClosing() {
        if case .running(let scope) = self.state { scope.cancel() }
        self.state = .closing
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The peer is gone: what it asked for can no longer be answered.
        if case .running(let scope) = self.state { scope.cancel() }
        self.incompleteMessageDeadline?.cancel()
        self.incompleteMessageDeadline = nil
        self.owed.removeAll()
        self.parked.removeAll()
        self.state = .closing
        self.queue.removeAll()
        context.fireChannelInactive()
    }

    /// Bytes as they arrive: split into messages here, with the frame decoder's rules, rather than by a
    /// `ByteToMessageHandler` in front (its bookkeeping and a pass through the pipeline per message cost a tenth
    /// of a post).
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.inputRefused else { return }
        var incoming = Self.unwrapInboundIn(data)
        if self.input == nil {
            self.input = incoming
        } else {
            // Only part of a message was left: moved to the front before the rest is added behind it.
            self.input!.discardReadBytes()
            self.input!.writeBuffer(&incoming)
        }
        // A call handled below may lead to another read before it returns: its bytes wait for this loop.
        guard !self.splitting else { return }
        self.splitting = true
        var split = false
        defer {
            self.splitting = false
            self.watchIncompleteMessage(context: context, restart: split)
        }
        while !self.inputRefused, self.input != nil {
            let frame: ByteBuffer?
            do throws(VarlinkProtocolError) {
                frame = try self.decoder.nextFrame(from: &self.input!)
            } catch {
                self.input = nil
                self.protocolViolation(context: context, error)
                return
            }
            guard let frame else { return }  // the rest of a message is still to come
            split = true
            if self.input?.readableBytes == 0 { self.input = nil }  // the next read's buffer is taken as it is
            let pending = self.parse(frame)
            switch self.state {
            case .idle: self.handle(context: context, pending)
            case .running, .waitingForReplies: self.enqueue(context: context, pending)
            case .closing: self.input = nil
            }
        }
    }

    /// Starts the clock on a message left unfinished after a read, or stops it once the input ends with a whole
    /// message. The clock runs from the message's first bytes, so that a peer cannot keep a connection by
    /// dripping a byte now and then; `restart`: a message ended in this read, and what is left is the next one's.
    /// One timer at most per connection: a read that leaves part of a message (as many do under a stream of
    /// pipelined calls) only notes the time.
    func watchIncompleteMessage(context: ChannelHandlerContext, restart: Bool) {
        guard self.input != nil, !self.inputRefused else {
            self.incompleteSince = nil
            return
        }
        guard restart || self.incompleteSince == nil else { return }
        let now = NIODeadline.now()
        self.incompleteSince = now
        if self.incompleteMessageDeadline == nil {
            self.armIncompleteMessageDeadline(context: context, at: now + self.incompleteMessageTimeout)
        }
    }

    func armIncompleteMessageDeadline(context: ChannelHandlerContext, at deadline: NIODeadline) {
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        self.incompleteMessageDeadline = context.eventLoop.scheduleTask(deadline: deadline) {
            handler.value.incompleteMessageDeadlinePassed(context: loopContext.value)
        }
    }

    func incompleteMessageDeadlinePassed(context: ChannelHandlerContext) {
        self.incompleteMessageDeadline = nil
        guard let since = self.incompleteSince else { return }
        let deadline = since + self.incompleteMessageTimeout
        let now = NIODeadline.now()
        if now < deadline {
            // The message this timer was set for ended; another began since.
            self.armIncompleteMessageDeadline(context: context, at: deadline)
            return
        }
        guard self.reading else {
            // The rest waits in the socket because this side stopped reading, not because the peer is slow: the
            // clock starts again.
            self.incompleteSince = now
            self.armIncompleteMessageDeadline(context: context, at: now + self.incompleteMessageTimeout)
            return
        }
        self.statistics.update { $0.connectionsTimedOut += 1 }
        self.logger.debug(
            "Varlink peer left a message unfinished, closing",
            metadata: ["bytes": "\(self.input?.readableBytes ?? 0)", "timeout": "\(self.incompleteMessageTimeout)"]
        )
        self.beginClosing()
        self.input = nil
        self.incompleteSince = nil
        context.close(promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushPending(context: context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.writable = context.channel.isWritable
        self.updateReading(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// The connection failed (a peer's protocol violations are found by this handler, not reported here).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("Varlink connection failed, closing", metadata: ["error": "\(error)"])
        self.beginClosing()
        context.close(promise: nil)
    }

    /// The peer's input broke the protocol (a message too large): nothing more of it is read, and it is refused
    /// once every call before it is answered.
    func protocolViolation(context: ChannelHandlerContext, _ protocolError: VarlinkProtocolError) {
        self.inputRefused = true
        switch self.state {
        case .idle where self.owed.isEmpty: self.refuse(context: context, error: protocolError)
        case .idle:
            self.state = .waitingForReplies
            self.enqueue(context: context, .refusal(protocolError))
        case .running, .waitingForReplies: self.enqueue(context: context, .refusal(protocolError))
        case .closing: break
        }
    }

    func parse(_ frame: ByteBuffer) -> Pending {
        do throws(VarlinkProtocolError) {
            // The last call's method was checked when that call was read.
            let call = try VarlinkCall(json: frame.readableBytesView, strings: self.strings, checkedMethod: self.lastMethod?.name) { method in
                if let last = self.lastMethod, last.name == method { return last.keptAsText }
                return self.service.parametersKeptAsText(method)
            }
            return .call(call, size: frame.readableBytes)
        } catch {
            return .refusal(error)
        }
    }

    func handle(context: ChannelHandlerContext, _ pending: consuming Pending) {
        switch consume pending {
        case .call(let call, let size): self.dispatch(context: context, call: call, size: size)
        case .refusal(let error) where self.owed.isEmpty: self.refuse(context: context, error: error)
        case .refusal(let error):
            // Every reply owed comes first.
            self.state = .waitingForReplies
            self.enqueue(context: context, .refusal(error))
        }
    }

    func enqueue(context: ChannelHandlerContext, _ pending: Pending) {
        self.queue.append(pending)
        if case .refusal = pending {
            // Nothing after a protocol violation is read: the connection ends once the queue reaches it.
            self.refusalQueued = true
        }
        self.updateReading(context: context)
    }

    /// Reads from the peer only while its queue has room and its unread replies are within bounds.
    func updateReading(context: ChannelHandlerContext) {
        let wanted = !self.refusalQueued && self.queue.count < self.maximumQueuedCalls
            && self.owed.count < self.maximumConcurrentCalls && self.writable
        guard wanted != self.reading else { return }
        self.reading = wanted
        // Fails only on a closed channel, which reads nothing anyway.
        context.channel.setOption(ChannelOptions.autoRead, value: wanted).whenFailure { _ in }
    }

    /// The peer broke the protocol: say why while a reply can still be sent, then hang up.
    func refuse(context: ChannelHandlerContext, error: VarlinkProtocolError) {
        self.beginClosing()
        self.queue.removeAll()
        self.statistics.update { $0.protocolErrors += 1 }
        self.logger.debug("Varlink peer broke the protocol, closing", metadata: ["reason": "\(error)"])
        // After the replies gathered before it, in the same write.
        VarlinkReply(error: error.varlinkError(in: self.service.protocolErrorInterface)).writeFrame(to: &self.outgoing)
        let buffer = context.channel.allocator.buffer(bytes: self.outgoing)
        self.outgoing.removeAll()
        let channel = context.channel
        self.pendingFlush = false
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// Takes the call: it moves into the request rather than being copied (the request is made in the branch that
    /// hands it on, so that nothing else holds the call's parameters while the method runs).
    func dispatch(context: ChannelHandlerContext, call: consuming VarlinkCall, size: Int) {
        let method: VarlinkMethod
        do throws(VarlinkError) {
            if let last = self.lastMethod, last.name == call.method {
                method = last.method
            } else {
                method = try self.service.method(for: call)
                self.lastMethod = (call.method, method, self.service.parametersKeptAsText(call.method))
            }
            // A message field, not a parameter: no method here hands the connection over to another protocol.
            if call.upgrade {
                throw VarlinkProtocolError.upgradeNotSupported(method: call.method)
                    .varlinkError(in: self.service.protocolErrorInterface)
            }
        } catch {
            self.statistics.update { $0.calls += 1 }
            self.reply(context: context, oneway: call.oneway, VarlinkReply(error: error))
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
            let oneway = call.oneway
            let name = call.method
            let reply: VarlinkReply
            do {
                reply = VarlinkReply(parameters: try body(VarlinkRequest(call: call, peer: self.requestPeer, messageSize: size)))
            } catch {
                reply = VarlinkReply(
                    error: Self.wireError(
                        error,
                        method: name,
                        protocolErrorInterface: self.service.protocolErrorInterface,
                        logger: self.logger
                    )
                )
            }
            self.reply(context: context, oneway: oneway, reply)
        case .deferred(let body):
            // A oneway call owes nothing: its id is never in the line.
            let oneway = call.oneway
            let id = oneway ? -1 : self.nextOwedID
            if !oneway {
                self.owed.append(id)
                self.nextOwedID += 1
            }
            let owed = VarlinkOwedReply(id: id, method: call.method, answered: self.answered)
            // An answer given before the body returns (nothing to wait for) is settled here, without a hop.
            self.answered.startDispatch(id)
            do {
                try body(VarlinkRequest(call: call, peer: self.requestPeer, messageSize: size), VarlinkPromisedReply(owed))
            } catch {
                owed.fail(error)
            }
            if let reply = self.answered.endDispatch() { self.settle(id: id, reply: reply) }
            self.updateReading(context: context)
        case .streaming(let body):
            // Its replies go to the channel directly: what was answered before it goes first.
            self.writeOutgoing(context: context)
            let responder = VarlinkResponder(channel: context.channel, call: copy call)
            let finished = NIOLoopBound(
                { [self] in self.streamingCallFinished(context: context) },
                eventLoop: context.eventLoop
            )
            let request = VarlinkRequest(call: call, peer: self.requestPeer, messageSize: size)
            let scope = Self.run(
                body,
                request: request,
                responder: responder,
                calls: self.calls,
                protocolErrorInterface: self.service.protocolErrorInterface,
                logger: self.logger
            ) {
                finished.value()
            }
            self.state = .running(scope: scope)
        }
    }

    /// Runs a streaming method as a child of the server's calls, which always ends the call with exactly one final
    /// reply and then hands control back to the connection on its event loop. A server that has stopped runs no
    /// more calls: the call fails at once.
    static func run(
        _ body: @escaping @Sendable (VarlinkRequest, VarlinkResponder) async throws -> Void,
        request: VarlinkRequest,
        responder: VarlinkResponder,
        calls: VarlinkCalls,
        protocolErrorInterface: String,
        logger: Logger,
        onLoop finished: @escaping @Sendable () -> Void
    ) -> VarlinkCallScope {
        let eventLoop = responder.eventLoop
        let scope = VarlinkCallScope()
        let started = calls.start {
            await scope.run {
                do {
                    try await body(request, responder)
                    if !responder.isFinished {
                        // Cancelled: its client went away (or the server is stopping), which ends a stream without a
                        // reply to read. Anyone can do that as often as they like, so it is no error.
                        if Task.isCancelled {
                            logger.debug("Streaming call ended with its client", metadata: ["method": "\(request.call.method)"])
                        } else {
                            logger.error("Method returned without a final reply", metadata: ["method": "\(request.call.method)"])
                        }
                        responder.fail(
                            VarlinkProtocolError.internalError("\(request.call.method) returned without a final reply")
                                .varlinkError(in: protocolErrorInterface)
                        )
                    }
                } catch is CancellationError where Task.isCancelled {
                    logger.debug("Streaming call ended with its client", metadata: ["method": "\(request.call.method)"])
                    responder.fail(
                        VarlinkProtocolError.internalError("\(request.call.method) was cancelled")
                            .varlinkError(in: protocolErrorInterface)
                    )
                } catch {
                    responder.fail(
                        Self.wireError(
                            error,
                            method: request.call.method,
                            protocolErrorInterface: protocolErrorInterface,
                            logger: logger
                        )
                    )
                }
            }
            eventLoop.execute(finished)
        }
        if !started {
            responder.fail(
                VarlinkProtocolError.internalError("\(request.call.method): the server is stopping")
                    .varlinkError(in: protocolErrorInterface)
            )
            eventLoop.execute(finished)
        }
        return scope
    }
}

/// The layout of Linux's `struct ucred`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
struct PeerCredentialsLayout: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
