import Foundation

/// Waits until `condition` holds, trying it again every `poll`; once `timeout` has passed without it, throws an
/// error that names `what` the test waited for. Blocks: call it through ``onThread(_:)`` from async code.
///
/// Wait for something that shows the step happened (a state, a line, a count), never for a fixed time.
public func waitUntil(
    _ what: @autoclosure () -> String,
    timeout: Duration = .seconds(20),
    poll: Duration = .milliseconds(10),
    _ condition: () throws -> Bool
) throws {
    try waitUntil(what(), timeout: timeout, poll: poll) { try condition() ? () : nil }
}

/// Waits until `found` returns a value, trying it again every `poll`, and returns that value; once `timeout` has
/// passed without one, throws an error that names `what` the test waited for. Blocks: call it through
/// ``onThread(_:)`` from async code.
///
/// - Important: For a `T` that takes `nil` as a value of its own (`JSONValue`, where it is JSON's null), spell
///   the closure's type out as returning `T?`: otherwise its `nil` is a value, and the wait ends at once.
public func waitUntil<T>(
    _ what: @autoclosure () -> String,
    timeout: Duration = .seconds(20),
    poll: Duration = .milliseconds(10),
    _ found: () throws -> T?
) throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try found() { return value }
        // Tried once more after the deadline, so that a slow poll does not fail a wait that was satisfied.
        guard ContinuousClock.now < deadline else { throw WaitTimedOut(what: what(), timeout: timeout) }
        Thread.sleep(forTimeInterval: Double(poll.components.seconds) + Double(poll.components.attoseconds) / 1e18)
    }
}

/// What ``waitUntil(_:timeout:poll:_:)`` throws when what it waited for did not come in time.
public struct WaitTimedOut: Error, CustomStringConvertible {
    /// What the test waited for, such as "org.example.mail to be suspended".
    public var what: String
    public var timeout: Duration

    public var description: String { "waited \(self.timeout) for \(self.what), in vain" }
}
