import NIOConcurrencyHelpers
import NIOCore

/// Counters a server keeps about its connections, safe to read from any thread.
public final class VarlinkServerStatistics: Sendable {
    /// A consistent reading of the counters.
    public struct Snapshot: Sendable, Hashable {
        /// Connections open now.
        public var connections = 0
        /// Connections accepted since start, those then refused over the limit included.
        public var connectionsTotal = 0
        /// Connections refused at once: a quota of ``VarlinkServerLimits`` was reached, or descriptors ran out.
        public var connectionsRefused = 0
        /// Connections closed because a message stayed unfinished for
        /// ``VarlinkServerLimits/incompleteMessageTimeout``.
        public var connectionsTimedOut = 0
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
    /// Connections open at once; further ones are refused as soon as they are accepted.
    public var maximumConnections: Int
    /// Connections open at once from one uid that is not privileged.
    public var maximumConnectionsPerUser: Int
    /// Of ``maximumConnections``, those only privileged peers (root, administrators) may use, so that they can
    /// always connect.
    public var reservedConnections: Int
    /// How long a message may stay unfinished (bytes read, its NUL not yet) before the connection is closed. A
    /// connection quiet between messages is never closed.
    public var incompleteMessageTimeout: Duration
    /// Refusals of connections logged per ``refusalLogInterval``; those beyond are counted in one entry at the
    /// interval's end.
    public var refusalLogBurst: Int
    public var refusalLogInterval: Duration
    /// Calls a client may have waiting behind a running one before the server stops reading from it.
    public var maximumQueuedCalls: Int
    /// Deferred calls (and the replies queued behind them) a client may have in flight before the server stops
    /// reading from it.
    public var maximumConcurrentCalls: Int

    public init(
        maximumMessageSize: Int = varlinkDefaultMaximumMessageSize,
        maximumConnections: Int = 4096,
        maximumConnectionsPerUser: Int = 256,
        reservedConnections: Int = 32,
        incompleteMessageTimeout: Duration = .seconds(10),
        refusalLogBurst: Int = 10,
        refusalLogInterval: Duration = .seconds(30),
        maximumQueuedCalls: Int = 128,
        maximumConcurrentCalls: Int = 128
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerUser = maximumConnectionsPerUser
        self.reservedConnections = reservedConnections
        self.incompleteMessageTimeout = incompleteMessageTimeout
        self.refusalLogBurst = refusalLogBurst
        self.refusalLogInterval = refusalLogInterval
        self.maximumQueuedCalls = maximumQueuedCalls
        self.maximumConcurrentCalls = maximumConcurrentCalls
    }
}

extension Duration {
    /// The same span as SwiftNIO schedules it.
    var timeAmount: TimeAmount {
        let (seconds, attoseconds) = self.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
