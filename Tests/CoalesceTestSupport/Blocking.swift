import Foundation
public import Varlink

/// Runs blocking work (socket reads, waits for a process) on a thread of its own, so that it never holds one of
/// the few threads of Swift's cooperative pool that the code under test may need.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.start()
    }
}

/// Runs `body`, then `cleanup` on a thread of its own (as ``onThread(_:)`` does) whether `body` threw or not: a
/// `defer` for async code whose cleanup blocks (waits for a process to end), which a `defer` block could only do on
/// the concurrency pool's thread.
public func withBlockingCleanup<T>(
    _ body: () async throws -> T,
    cleanup: @escaping @Sendable () -> Void
) async throws -> T {
    let result: Result<T, any Error>
    do {
        result = .success(try await body())
    } catch {
        result = .failure(error)
    }
    try await onThread { cleanup() }
    return try result.get()
}

/// Hands one optional error from a task to a waiting thread.
public final class DispatchSemaphoreBox: @unchecked Sendable {
    // The semaphore orders the write before the read.
    private let semaphore = DispatchSemaphore(value: 0)
    private var error: (any Error)?

    public init() {}

    public func finish(_ error: (any Error)?) {
        self.error = error
        self.semaphore.signal()
    }

    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func wait() -> (any Error)? {
        self.semaphore.wait()
        return self.error
    }
}

/// A client for tests: like `VarlinkClient(path:)`, but a reply that does not come within `timeout` fails the call
/// instead of hanging the test run. Generous: in a whole run, the CPU-bound property tests can hold both threads of
/// the concurrency pool that in-process servers answer on for tens of seconds.
public func testClient(_ path: String, timeout: Duration = .seconds(120)) throws -> VarlinkClient {
    let client = try VarlinkClient(path: path)
    client.setReceiveTimeout(timeout)
    return client
}

/// Configuration for a daemon whose app is the test's own process (``attachedFromThisProcess(_:app:)``): a missed
/// deadline would kill the test run, so none can be missed; and a suspended app is left running
/// (`Suspension=cooperative`), as a stopped one would stop the test run.
public let noDeadlines = "[Apps]\nAcknowledgeTimeoutSec=1h\nSuspension=cooperative\n"

/// A configuration under which suspended apps are left running (`Suspension=cooperative`): for tests of a suspended
/// app's process attaching again on its own after a restart of the daemon, which a stopped process cannot do until
/// it is woken (SuspensionTests covers that).
public let cooperative = "[Apps]\nSuspension=cooperative\n"

/// Registers `app` and attaches it from the calling process, which the attach launches; returns its stream once the
/// launch's callbacks are read and acknowledged (on a connection of their own: the stream's is taken by the
/// Attach). Run the daemon with ``noDeadlines``.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func attachedFromThisProcess(_ socket: String, app: String) throws -> VarlinkClient {
    let requests = try testClient(socket)
    _ = try requests.call("io.coalesced.App.Register", ["name": .string(app)])
    let stream = try testClient(socket)
    try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(app)], more: true))
    let kinds = try (0..<4).map { _ in try stream.receiveReply().parameters["callback"] }
    guard kinds.map({ $0?["kind"]?.stringValue })
        == [nil, "lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"],
        let active = kinds[3]?["seq"]
    else { throw SupportError("\(app) was not launched by its attach: \(kinds)") }
    _ = try requests.call("io.coalesced.App.Ack", ["app": .string(app), "seq": active])
    return stream
}

/// An app as `System.GetApp` describes it.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func appInfo(_ system: VarlinkClient, _ name: String) throws -> JSONValue {
    try system.call("io.coalesced.System.GetApp", ["app": .string(name)])["app"] ?? .null
}

/// Waits until `GetApp` shows the app's `member` (its state, whether it is attached) as `value`, and returns the
/// app; fails with what it showed last after `timeout`.
@discardableResult
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitForApp(
    _ system: VarlinkClient,
    _ name: String,
    _ member: String,
    _ value: JSONValue,
    timeout: Duration = .seconds(20)
) throws -> JSONValue {
    var last = JSONValue.null
    return try waitUntil("\(name)'s \(member) to be \(value) (it stayed \(last[member] ?? .null))", timeout: timeout) {
        () throws -> JSONValue? in
        // Optional by its type: JSONValue takes `nil` as JSON's null.
        last = try appInfo(system, name)
        return last[member] == value ? Optional(last) : Optional.none
    }
}

/// Waits until the app has acknowledged every event it was sent, as the daemon's memory says (`GetQueue`). An
/// acknowledgement covers everything numbered up to it, lifecycle callbacks included: by then the daemon has
/// also acted on the acknowledgements of the callbacks sent before those events.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func waitForAcknowledged(_ system: VarlinkClient, _ name: String, timeout: Duration = .seconds(20)) throws {
    var unacknowledged = JSONValue.null
    try waitUntil("\(name) to acknowledge its events (\(unacknowledged) unacknowledged)", timeout: timeout) {
        unacknowledged = try system.call("io.coalesced.System.GetQueue", ["app": .string(name)])["unacknowledged"] ?? .null
        return unacknowledged == .int(0)
    }
}
