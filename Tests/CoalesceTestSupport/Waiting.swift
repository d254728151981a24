public import Foundation

// Every wait of the tests goes through one loop: try, and once the deadline has passed without success, fail naming
// what was waited for. The forms differ only in how they pause between tries: a fixed poll on a thread
// (`waitUntil(_:timeout:poll:_:)`), a poll that suspends in async code, until a condition variable is signalled
// (`signalledBy:`), or a pause of the caller's own (`pausingWith:`, a bus that is read while waiting).
//
// The blocking forms are disfavoured overloads: in async code a call takes the async form, which suspends instead of
// holding one of the concurrency pool's few threads that the code under test may need; in a blocking context (a
// body run through `onThread`) the blocking form is the only one that fits.

/// Waits until `condition` holds, trying it again every `poll`; once `timeout` has passed without it, throws an
/// error that names `what` the test waited for. Blocks: call it through ``onThread(_:)`` from async code, or use
/// the async form, which async code gets by default.
///
/// Wait for something that shows the step happened (a state, a line, a count), never for a fixed time.
@_disfavoredOverload
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitUntil(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    poll: Duration = .milliseconds(10),
    _ condition: () throws -> Bool
) throws {
    try waitUntil(what(), timeout: timeout, poll: poll) { try condition() ? () : nil }
}

/// Waits until `found` returns a value, trying it again every `poll`, and returns that value; once `timeout` has
/// passed without one, throws an error that names `what` the test waited for. Blocks: call it through
/// ``onThread(_:)`` from async code, or use the async form, which async code gets by default.
///
/// - Important: For a `T` that takes `nil` as a value of its own (`JSONValue`, where it is JSON's null), spell
///   the closure's type out as returning `T?`: otherwise its `nil` is a value, and the wait ends at once.
@_disfavoredOverload
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitUntil<T>(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    poll: Duration = .milliseconds(10),
    _ found: () throws -> T?
) throws -> T {
    try waitUntil(
        what(),
        timeout: timeout,
        pausingWith: { _ in Thread.sleep(forTimeInterval: poll.timeInterval) },
        found
    )
}

/// Waits until `found` returns a value, calling `pause` with the time left between tries, and returns that value;
/// once `timeout` has passed without one, throws an error that names `what` the test waited for. For a wait whose
/// pause is itself a wait for news (a bus read for at most a moment): it ends as soon as the news comes.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitUntil<T>(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    pausingWith pause: (_ left: Duration) throws -> Void,
    _ found: () throws -> T?
) throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try found() { return value }
        let left = deadline - ContinuousClock.now
        // Tried once more after the deadline, so that a slow pause does not fail a wait that was satisfied.
        guard left > .zero else { throw WaitTimedOut(what: what(), timeout: timeout) }
        try pause(left)
    }
}

/// Waits until `found` returns a value, trying it again each time `condition` is signalled, and returns that
/// value; once `timeout` has passed without one, throws an error that names `what` the test waited for. `found`
/// (and `what`) run with the condition's lock held: they read the state the condition guards directly. `found`
/// may throw to end the wait early (the process that would have printed the line has ended).
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitUntil<T>(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    signalledBy condition: NSCondition,
    _ found: () throws -> T?
) throws -> T {
    try condition.withLock {
        try waitUntil(
            what(),
            timeout: timeout,
            pausingWith: { left in _ = condition.wait(until: Date(timeIntervalSinceNow: left.timeInterval)) },
            found
        )
    }
}

/// Waits until `condition` holds, trying it again every `poll` and suspending in between; once `timeout` has passed
/// without it, throws an error that names `what` the test waited for.
public func waitUntil(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    poll: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws {
    try await waitUntil(what(), timeout: timeout, poll: poll) { try await condition() ? () : nil }
}

/// Waits until `found` returns a value, trying it again every `poll` and suspending in between, and returns that
/// value; once `timeout` has passed without one, throws an error that names `what` the test waited for.
///
/// - Important: As for the blocking form, spell the closure's type out as returning `T?` for a `T` that takes
///   `nil` as a value of its own.
public func waitUntil<T>(
    _ what: @autoclosure () -> String,
    timeout: Duration = waitLimit,
    poll: Duration = .milliseconds(10),
    _ found: () async throws -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await found() { return value }
        // Tried once more after the deadline, as the blocking form does.
        guard ContinuousClock.now < deadline else { throw WaitTimedOut(what: what(), timeout: timeout) }
        try await Task.sleep(for: poll)
    }
}

/// How long a wait lasts unless its caller says otherwise. Long, because it bounds only a wait that fails: in the
/// first half minute of a whole run about a hundred daemons and apps start on two cores, and a step that takes a
/// millisecond alone can take tens of seconds then.
public let waitLimit = Duration.seconds(60)

/// What ``waitUntil(_:timeout:poll:_:)`` and its other forms throw when what they waited for did not come in time.
public struct WaitTimedOut: Error, CustomStringConvertible {
    /// What the test waited for, such as "org.example.mail to be suspended".
    public var what: String
    public var timeout: Duration

    public var description: String { "waited \(self.timeout) for \(self.what), in vain" }
}

extension Duration {
    /// The span in seconds, as Foundation's waits take it.
    fileprivate var timeInterval: TimeInterval {
        Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
    }
}
