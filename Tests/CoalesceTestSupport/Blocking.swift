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

    public func wait() -> (any Error)? {
        self.semaphore.wait()
        return self.error
    }
}

/// A client for tests: like `VarlinkClient(path:)`, but a reply that does not come within `timeout` fails the call
/// instead of hanging the test run.
public func testClient(_ path: String, timeout: Duration = .seconds(30)) throws -> VarlinkClient {
    let client = try VarlinkClient(path: path)
    client.setReceiveTimeout(timeout)
    return client
}
