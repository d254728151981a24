import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

// Replies: written in call order, flushed once per read, the answered calls of a stream's task settled on the loop.
extension VarlinkConnectionHandler {
    func reply(context: ChannelHandlerContext, oneway: Bool, _ reply: VarlinkReply) {
        guard !oneway else { return }
        guard self.owed.isEmpty else {
            // Behind the replies deferred calls still owe.
            self.owed.append(self.nextOwedID)
            self.parked[self.nextOwedID] = reply
            self.nextOwedID += 1
            return
        }
        reply.writeFrame(to: &self.outgoing)
        self.pendingFlush = true
    }

    /// Hands the reply frames gathered so far to the channel, as one buffer.
    func writeOutgoing(context: ChannelHandlerContext) {
        guard !self.outgoing.isEmpty else { return }
        context.write(Self.wrapOutboundOut(context.channel.allocator.buffer(bytes: self.outgoing)), promise: nil)
        self.outgoing.removeAll(keepingCapacity: true)
        self.pendingFlush = true
    }

    // Writability changes only when written bytes are flushed, so check after each flush.
    func flushPending(context: ChannelHandlerContext) {
        self.writeOutgoing(context: context)
        guard self.pendingFlush else { return }
        self.pendingFlush = false
        context.flush()
        self.updateReading(context: context)
    }

    /// Deferred calls answered from other threads since the last time: their replies, then one flush.
    func deliverAnswered(context: ChannelHandlerContext) {
        // Every reply that can go now, in one buffer and one write.
        self.answered.take(swapping: &self.taken)
        if self.taken.count > 1, let head = self.owed.first {
            // In call order: answers come in the order their work finished (a store batch answers write by write,
            // and a write gathers the posts to one app), and a reply settled ahead of its turn has to be parked.
            // The line holds consecutive ids from its head, so each answer's place in it is its id less the head's.
            self.places.removeAll(keepingCapacity: true)
            self.places.append(contentsOf: repeatElement(-1, count: self.owed.count))
            for index in self.taken.indices {
                let place = self.taken[index].id - head
                if place >= 0, place < self.places.count { self.places[place] = index }
            }
            for index in self.places where index >= 0 { self.settle(id: self.taken[index].id, reply: self.taken[index].reply) }
        } else {
            for (id, reply) in self.taken { self.settle(id: id, reply: reply) }
        }
        self.taken.removeAll(keepingCapacity: true)
        self.afterReplies(context: context)
    }

    /// Records a deferred call's reply, and adds the frames of the replies now at the head of the line to what
    /// goes out.
    func settle(id: Int, reply: VarlinkReply) {
        // Ids go into the line in increasing order and leave it from the front: one from the front on is owed.
        guard let head = self.owed.first, id >= head else { return }  // a oneway call's, or the connection is closing
        guard id == head else {
            // The head of the line is still owed (else it would have gone): this one waits behind it.
            self.parked[id] = reply
            return
        }
        // Answered in call order, as deferred calls mostly are: out at once.
        self.owed.removeFirst()
        reply.writeFrame(to: &self.outgoing)
        self.pendingFlush = true
        while !self.parked.isEmpty, let next = self.owed.first, let waiting = self.parked.removeValue(forKey: next) {
            self.owed.removeFirst()
            waiting.writeFrame(to: &self.outgoing)
        }
    }

    /// Once replies went out: calls that waited for them start, and what was written is flushed.
    func afterReplies(context: ChannelHandlerContext) {
        if self.owed.isEmpty, case .waitingForReplies = self.state {
            self.state = .idle
            while case .idle = self.state, self.owed.isEmpty, let next = self.queue.popFirst() {
                self.handle(context: context, next)
            }
        }
        self.flushPending(context: context)
        self.updateReading(context: context)
    }

    func streamingCallFinished(context: ChannelHandlerContext) {
        guard case .running = self.state else { return }
        self.state = .idle
        while case .idle = self.state, let next = self.queue.popFirst() {
            self.handle(context: context, next)
        }
        self.flushPending(context: context)
        self.updateReading(context: context)
    }

    /// A method's error as the peer sees it. Errors that are not part of an interface are our bugs: they are
    /// logged here, once, and reach the peer as the protocol-error interface's `InternalError`.
    static func wireError(
        _ error: any Error,
        method: String,
        protocolErrorInterface: String,
        logger: Logger
    ) -> any VarlinkErrorConvertible {
        if let error = error as? any VarlinkErrorConvertible { return error }
        logger.error(
            "Method failed with an undeclared error",
            metadata: ["method": "\(method)", "error": "\(error)"]
        )
        return VarlinkProtocolError.internalError("\(error)").varlinkError(in: protocolErrorInterface)
    }
}
