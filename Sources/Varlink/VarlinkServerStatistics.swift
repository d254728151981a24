import NIOConcurrencyHelpers

/// Counters a server keeps about its connections, safe to read from any thread.
public final class VarlinkServerStatistics: Sendable {
    /// A consistent reading of the counters.
    public struct Snapshot: Sendable, Hashable {
        /// Connections open now.
        public var connections = 0
        /// Connections accepted since start, those then refused over the limit included.
        public var connectionsTotal = 0
        /// Connections refused because ``VarlinkServerLimits/maximumConnections`` were open.
        public var connectionsRefused = 0
        /// Calls received, whatever their outcome.
        public var calls = 0
        /// Connections closed because the peer broke the protocol (bad JSON, oversized message).
        public var protocolErrors = 0
    }

    private let box = NIOLockedValueBox(Snapshot())

    public init() {}

    public var snapshot: Snapshot { self.box.withLockedValue { $0 } }

    func update(_ body: (inout Snapshot) -> Void) {
        self.box.withLockedValue(body)
    }
}

/// Bounds on what peers may make the server hold. Changing them affects connections accepted afterwards.
public struct VarlinkServerLimits: Sendable, Hashable {
    /// The largest message accepted, in bytes, the closing NUL not counted.
    public var maximumMessageSize: Int
    /// Connections open at once; further ones are closed as soon as they are accepted.
    public var maximumConnections: Int
    /// Calls a client may have waiting behind a running one before the server stops reading from it.
    public var maximumQueuedCalls: Int
    /// Deferred calls (and the replies queued behind them) a client may have in flight before the server stops
    /// reading from it.
    public var maximumConcurrentCalls: Int

    public init(
        maximumMessageSize: Int = varlinkDefaultMaximumMessageSize,
        maximumConnections: Int = 4096,
        maximumQueuedCalls: Int = 128,
        maximumConcurrentCalls: Int = 128
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumConnections = maximumConnections
        self.maximumQueuedCalls = maximumQueuedCalls
        self.maximumConcurrentCalls = maximumConcurrentCalls
    }
}
