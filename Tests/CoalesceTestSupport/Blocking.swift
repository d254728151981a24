import Foundation

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

/// What a finished command printed and how it exited.
public struct Run: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a command to completion, capturing its output. Blocks: call it through ``onThread(_:)`` from async code.
public func runProcess(_ path: String, _ arguments: [String]) throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Both pipes are drained at once: a child that fills one while we wait on the other would never finish.
    nonisolated(unsafe) var stderr = Data()
    let stderrDone = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        stderr = err.fileHandleForReading.readDataToEndOfFile()
        stderrDone.signal()
    }
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    stderrDone.wait()
    process.waitUntilExit()
    return Run(
        status: process.terminationStatus,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self)
    )
}
