import CoalesceCore

/// Time for the core's tests: an offset from zero that moves only when a test says so.
struct TestInstant: InstantProtocol {
    var offset: Duration

    static let zero = TestInstant(offset: .zero)

    func advanced(by duration: Duration) -> TestInstant { TestInstant(offset: self.offset + duration) }
    func duration(to other: TestInstant) -> Duration { other.offset - self.offset }
    static func < (lhs: TestInstant, rhs: TestInstant) -> Bool { lhs.offset < rhs.offset }
}

typealias Lifecycle = AppLifecycle<TestInstant>

extension [LifecycleEffect] {
    /// The callbacks delivered, in order.
    var callbacks: [LifecycleCallback] {
        self.compactMap { if case .deliver(let callback, _, _) = $0 { callback } else { nil } }
    }

    /// The states passed through, in order, starting with the first `from`.
    var states: [AppState] {
        var states: [AppState] = []
        for case .transition(let from, let to, _) in self {
            if states.isEmpty { states.append(from) }
            states.append(to)
        }
        return states
    }

    /// The sequence number of the last delivered callback.
    var lastSequence: UInt64? {
        self.compactMap { if case .deliver(_, let sequence, _) = $0 { sequence } else { nil } }.last
    }
}
