// What the store kept, put back at start, and what became of a write the inbox asked for.
extension Inbox {
    // MARK: What the store kept

    /// Puts back a held slot read from the store; slots come back in the order they were first posted.
    @inlinable
    public mutating func restore(_ kind: EventKind, _ slot: Queue.Slot) {
        self._held.restore(kind, slot)
        self.storedKinds.insert(kind)
    }

    /// Puts back a queue kind's entry read from the store, after its slot; entries come back oldest first.
    @inlinable
    public mutating func restore(_ kind: EventKind, _ entry: Queue.Entry) { self._held.restore(kind, entry) }

    /// Puts back a stored event not yet acknowledged.
    @inlinable
    public mutating func restore(_ stored: Stored) {
        self._undelivered.append(stored)
        self.outstandingBytes += Self.bytes(of: stored.event)
    }

    /// Puts back what the app last received of a netChange kind.
    @inlinable
    public mutating func restoreBaseline(_ kind: EventKind, _ payload: Payload) { self._held.setBaseline(kind, payload) }

    // MARK: What became of a write

    /// The write is on disk; `ids` are the numbers the store gave its deliveries, in order.
    @inlinable
    public mutating func written(ids: [Int64], _ reception: Reception, next: inout UInt64) -> [Action] {
        guard let flight = self.flight else { return [] }
        self.flight = nil
        self._held.keepChanges()
        self.storedKinds = flight.storedKinds
        var ids = ids[...]
        for (stored, event) in flight.events {
            self._undelivered.append(Stored(id: stored ? ids.popFirst() : nil, event: event))
        }
        self.outstandingBytes += flight.eventBytes
        var actions: [Action] = flight.answers.isEmpty ? [] : [.answer(flight.answers)]
        actions += self.sending(self.sendUndelivered(reception, next: &next))
        actions += self.flush(reception, next: &next)
        return actions
    }

    /// The store refused the write: nothing of it was kept and every post in it fails. A delivery of what the app
    /// held is tried again later; what waits is decided now, behind it.
    @inlinable
    public mutating func writeFailed(_ reception: Reception, next: inout UInt64) -> [Action] {
        guard let flight = self.flight else { return [] }
        self.flight = nil
        self._held.takeBackChanges(to: flight.mark)
        self._held.keepChanges()
        var actions: [Action] = flight.answers.isEmpty ? [] : [.answer(flight.answers.map { ($0.ticket, .storeFailed) })]
        if flight.drains {
            self._drainRefused = true
            actions.append(.retryLater)
        }
        actions += self.flush(reception, next: &next)
        return actions
    }

    /// Time to try a refused delivery again. An app that does not receive now gets it with its next wake.
    @inlinable
    public mutating func retry(_ reception: Reception, next: inout UInt64) -> [Action] {
        guard self._drainRefused, self.flight == nil, reception.receives else { return [] }
        self.drainWanted = true
        return self.flush(reception, next: &next)
    }

    /// The app receives at once again (woken, launched, or a new stream attached): first what it has not
    /// acknowledged (after a new attach), renumbered, then what was stored for it and not sent, then what it held,
    /// coalesced, once that delivery is on disk.
    @inlinable
    public mutating func woke(_ reception: Reception, next: inout UInt64) -> [Action] {
        guard reception.receives else { return [] }
        var actions: [Action] = []
        if self.redeliver {
            self.redeliver = false
            if !self._unacknowledged.isEmpty {
                self._unacknowledged = self._unacknowledged.map { Self.numbered($0.id, $0.event, &next) }
                actions.append(.send(self._unacknowledged))
            }
        }
        actions += self.sending(self.sendUndelivered(reception, next: &next))
        if !self._held.isEmpty || self._drainRefused || self.flight != nil || !self.waiting.isEmpty {
            self.drainWanted = true
            actions += self.flush(reception, next: &next)
        }
        return actions
    }

    /// A new stream attached for the app: what was sent and not acknowledged goes out again once it receives.
    @inlinable
    public mutating func attached() {
        self.redeliver = true
    }

    /// The app has handled everything up to `seq`: those events are forgotten. An app that had fallen behind and
    /// caught up gets what was held meanwhile.
    @inlinable
    public mutating func acknowledged(upTo seq: UInt64, _ reception: Reception, next: inout UInt64) -> [Action] {
        guard let first = self._unacknowledged.first, first.seq <= seq else { return [] }
        let handled = self._unacknowledged.prefix { $0.seq <= seq }
        let ids = handled.compactMap(\.id)
        for sent in handled { self.outstandingBytes -= Self.bytes(of: sent.event) }
        self._unacknowledged.removeFirst(handled.count)
        var actions: [Action] = ids.isEmpty ? [] : [.forget(ids)]
        if reception.receives, self._unacknowledged.count < Self.maximumUnacknowledged / 2, !self._drainRefused,
            !self._held.isEmpty || self.flight != nil
        {
            self.drainWanted = true
            actions += self.flush(reception, next: &next)
        }
        return actions
    }
}
