import Foundation

/// A child process whose standard output is collected line by line as it comes, for tests that watch a running
/// program (an app, `coalescectl monitor`).
public final class WatchedProcess: @unchecked Sendable {
    public let child: ChildProcess
    private let collected = Collected()

    /// What the reading thread collects: apart from the process object, so that the thread does not keep that
    /// alive, and the child is killed when the test lets go of it (an app whose daemon is gone retries forever).
    private final class Collected: @unchecked Sendable {
        let condition = NSCondition()
        var lines: [String] = []
        var closed = false
        /// How many lines a consumer such as ``ExampleApp/nextCallbacks(_:timeout:)`` has taken.
        var consumed = 0
    }

    /// Starts `executable`; `environment` is added to the test's own. With `input`, its standard input is a socket
    /// the test writes to (``write(_:)``) and closes (``closeInput()``, or when it lets go of the process).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], input: Bool = false) throws {
        var pipeEnds: [CInt] = [0, 0]
        var inputEnds: [CInt] = [-1, -1]
        let created = ChildProcess.spawning.withLock { () -> Bool in
            guard pipe(&pipeEnds) == 0 else { return false }
            // A socket rather than a pipe: a write after the process ended fails instead of raising SIGPIPE.
            guard !input || socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &inputEnds) == 0 else {
                pipeEnds.forEach { close($0) }
                return false
            }
            for fd in pipeEnds + inputEnds where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return true
        }
        guard created else { throw SupportError("pipe failed") }
        do {
            let merged = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
            self.child = try ChildProcess(
                executable, arguments, environment: merged, output: pipeEnds[1], input: input ? inputEnds[0] : nil
            )
        } catch {
            (pipeEnds + inputEnds).filter { $0 >= 0 }.forEach { close($0) }
            throw error
        }
        close(pipeEnds[1])
        if input { close(inputEnds[0]) }
        self.input = Input(descriptor: inputEnds[1])
        let readEnd = pipeEnds[0]
        let collected = self.collected
        Thread.detachNewThread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                pending += chunk[..<count]
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    collected.condition.withLock {
                        collected.lines.append(line)
                        collected.condition.broadcast()
                    }
                }
            }
            close(readEnd)
            collected.condition.withLock {
                collected.closed = true
                collected.condition.broadcast()
            }
        }
    }

    deinit {
        self.child.signal(SIGKILL)
        self.closeInput()
    }

    /// Everything printed so far.
    public var output: [String] { self.collected.condition.withLock { self.collected.lines } }

    /// The write end of the process's standard input, when it has one; -1 once closed.
    private final class Input: @unchecked Sendable {
        let lock = NSLock()
        var descriptor: CInt

        init(descriptor: CInt) { self.descriptor = descriptor }
    }
    private let input: Input

    /// Writes `text` to the process's standard input.
    public func write(_ text: String) throws {
        try self.input.lock.withLock {
            let bytes = Array(text.utf8)
            guard self.input.descriptor >= 0,
                bytes.withUnsafeBytes({ send(self.input.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count
            else { throw SupportError("cannot write to the standard input of \(self.child.pid)") }
        }
    }

    /// Closes the process's standard input: it reads its end.
    public func closeInput() {
        self.input.lock.withLock {
            if self.input.descriptor >= 0 { close(self.input.descriptor) }
            self.input.descriptor = -1
        }
    }

    /// Waits for a line that starts with `prefix` and returns it.
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitForLine(_ prefix: String, timeout: Duration = waitLimit) throws -> String {
        try self.wait(timeout: timeout, "a line starting with '\(prefix)'") { lines, _ in
            lines.last { $0.hasPrefix(prefix) }
        }
    }

    /// Waits for a line that contains `text` and returns it.
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitForLine(containing text: String, timeout: Duration = waitLimit) throws -> String {
        try self.wait(timeout: timeout, "a line containing '\(text)'") { lines, _ in lines.last { $0.contains(text) } }
    }

    /// Waits until `found` returns a value for the lines so far (it may move the consumed count); fails at once
    /// when the process has ended without printing what it looks for.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    fileprivate func wait<T>(timeout: Duration, _ what: String, _ found: ([String], inout Int) -> T?) throws -> T {
        let collected = self.collected
        return try waitUntil(
            "\(what); output:\n\(collected.lines.joined(separator: "\n"))",
            timeout: timeout,
            signalledBy: collected.condition
        ) {
            if let result = found(collected.lines, &collected.consumed) { return result }
            // A process whose output has ended prints nothing more: no use waiting out the deadline.
            guard !collected.closed else {
                throw SupportError(
                    "no \(what) before the output ended; output:\n\(collected.lines.joined(separator: "\n"))"
                )
            }
            return nil
        }
    }

    fileprivate var consumedCount: Int { self.collected.condition.withLock { self.collected.consumed } }
}

/// The example app (`coalesce-example`) running as a child process: the tests watch a real app built on
/// CoalesceClient live through its lifecycle.
public final class ExampleApp: @unchecked Sendable {
    public let name: String
    private let process: WatchedProcess
    public var child: ChildProcess { self.process.child }

    /// Starts the example app for `name` against the daemon's socket; `asUser` runs it under that user (through
    /// setpriv, from a copy in `directory` that the user can execute).
    public init(
        socket: String,
        name: String,
        arguments: [String] = [],
        asUser user: String? = nil,
        directory: TemporaryDirectory? = nil
    ) throws {
        self.name = name
        var executable = BuildProducts.path(of: "coalesce-example")
        var argv = ["--socket", socket, "--name", name] + arguments
        if let user {
            guard let directory else { throw SupportError("an app run as \(user) needs a directory its copy can be run from") }
            let copy = try executableCopy(of: "coalesce-example", in: directory)
            argv = ["--reuid=\(user)", "--regid=nogroup", "--clear-groups", copy] + argv
            executable = "/usr/bin/setpriv"
        }
        self.process = try WatchedProcess(executable, argv)
    }

    /// Kills the app (SIGKILL, as a crash would end it) and waits for it to be gone.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func kill() {
        self.child.signal(SIGKILL)
        _ = self.child.wait(timeout: .seconds(10))
    }

    /// Everything printed so far.
    public var output: [String] { self.process.output }

    /// Waits for a line that starts with `prefix` and returns it.
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitForLine(_ prefix: String, timeout: Duration = waitLimit) throws -> String {
        try self.process.waitForLine(prefix, timeout: timeout)
    }

    /// The next `count` callbacks the app received (their names), in order.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func nextCallbacks(_ count: Int, timeout: Duration = waitLimit) throws -> [String] {
        try self.process.wait(timeout: timeout, "\(count) more callbacks of \(self.name)") { lines, consumed in
            let callbacks = lines.filter { $0.hasPrefix("callback ") }.map { String($0.split(separator: " ")[1]) }
            guard callbacks.count >= consumed + count else { return nil }
            consumed += count
            return Array(callbacks[(consumed - count)..<consumed])
        }
    }

    /// The events received so far (`event KIND count=N payload=JSON [dropped=N]`), without their sequence numbers,
    /// once there are at least `count`.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func events(atLeast count: Int, timeout: Duration = waitLimit) throws -> [String] {
        try self.process.wait(timeout: timeout, "\(count) events for \(self.name)") { lines, _ in
            let events = lines.filter { $0.hasPrefix("event ") }
            guard events.count >= count else { return nil }
            return events.map(Self.withoutSequence)
        }
    }

    /// The events received before `event` (a line as ``events(atLeast:timeout:)`` shows it), once that has come.
    /// What the daemon sends an app when it attaches or wakes comes before anything posted to it later: so an
    /// event posted now shows, when it arrives, that nothing else was on its way.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func events(before event: String, timeout: Duration = waitLimit) throws -> [String] {
        try self.process.wait(timeout: timeout, "'\(event)' for \(self.name)") { lines, _ in
            let events = lines.filter { $0.hasPrefix("event ") }.map(Self.withoutSequence)
            return events.firstIndex(of: event).map { Array(events[..<$0]) }
        }
    }

    /// An event line without its ` seq=N`.
    private static func withoutSequence(_ line: String) -> String {
        String(line[..<(line.range(of: " seq=")?.lowerBound ?? line.endIndex)])
    }

    /// The sequence numbers of the events received so far.
    public var eventSequences: [Int64] {
        self.process.output.filter { $0.hasPrefix("event ") }.compactMap { line in
            line.range(of: " seq=").flatMap { Int64(line[$0.upperBound...]) }
        }
    }

    /// Callback lines received beyond those already handed out by ``nextCallbacks(_:timeout:)``.
    public var unreadCallbacks: [String] {
        Array(self.process.output.filter { $0.hasPrefix("callback ") }.dropFirst(self.process.consumedCount))
    }
}
