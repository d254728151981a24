/// A wait that doubles after each failure, up to a limit, and starts over after a success: how an agent tries a
/// daemon or a desktop again.
public struct Backoff: Sendable {
    public let first: Duration
    public let last: Duration
    private var current: Duration

    public init(first: Duration, last: Duration) {
        self.first = first
        self.last = last
        self.current = first
    }

    /// How long to wait before the next try.
    public mutating func next() -> Duration {
        defer { self.current = min(self.current * 2, self.last) }
        return self.current
    }

    public mutating func reset() { self.current = self.first }
}
