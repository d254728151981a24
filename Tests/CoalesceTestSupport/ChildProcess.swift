import Foundation

/// A child process started with posix_spawn and reaped by a thread of its own.
///
/// Not Foundation's `Process`: on Linux it reaps every child with a blocking waitpid on one shared thread. With
/// tests running in parallel we caught that thread waiting on a child that was still running while every other
/// `Process` in the run went unnoticed (all their `waitUntilExit` calls hung). Each child here has its own
/// reaper; the signal mask and dispositions are reset too, since test threads block almost every signal.
public final class ChildProcess: @unchecked Sendable {
    // `status` is written once by the reaper before `ended` is signalled, and read only after that.
    public let pid: Int32
    private var status: Int32?

    /// Held while descriptors are created and while children are spawned, so that no child inherits a pipe end
    /// another test made before it was marked close-on-exec.
    static let spawning = NSLock()
    private let ended = DispatchSemaphore(value: 0)

    /// Starts `path` with `arguments`.
    /// - Parameters:
    ///   - environment: the whole environment; the test process's own when `nil`.
    ///   - output: where standard output and error go (a descriptor the caller keeps); /dev/null when `nil`.
    ///   - error: where standard error goes when it should differ from `output`.
    ///   - input: where standard input comes from (a descriptor the caller keeps); /dev/null when `nil`.
    public init(
        _ path: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        output: CInt? = nil,
        error: CInt? = nil,
        input: CInt? = nil
    ) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let output {
            posix_spawn_file_actions_adddup2(&actions, output, 1)
            posix_spawn_file_actions_adddup2(&actions, error ?? output, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        // Nothing else is inherited. SwiftNIO accepts connections without close-on-exec, so a child of this test
        // process would otherwise keep an in-process server's connections open after the server closed them.
        _ = closeFromAction(&actions, 3)

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = variables.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }

        var spawned: pid_t = 0
        let result = Self.spawning.withLock { posix_spawn(&spawned, path, &actions, &attributes, argv, envp) }
        guard result == 0 else { throw SupportError("cannot start \(path): \(String(cString: strerror(result)))") }
        self.pid = spawned
        let pid = spawned
        Thread.detachNewThread { [self] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0, errno == EINTR {}
            // Exit status, or 128 + the signal that ended it, as shells report it.
            let exitStatus = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
            self.status = exitStatus
            self.ended.signal()
        }
    }

    /// Sends a signal; nothing happens once the child has been reaped.
    public func signal(_ signal: Int32) {
        guard !self.hasEnded else { return }
        kill(self.pid, signal)
    }

    public var hasEnded: Bool {
        guard self.ended.wait(timeout: .now()) == .success else { return false }
        self.ended.signal()
        return true
    }

    /// Waits at most `timeout` for the child to end; its status, or `nil` if it is still running.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func wait(timeout: Duration) -> Int32? {
        let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard self.ended.wait(timeout: .now() + .milliseconds(milliseconds)) == .success else { return nil }
        self.ended.signal()  // later waits see the end too
        return self.status
    }

    /// Waits for the child to end, however long it takes.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func wait() -> Int32 {
        self.ended.wait()
        self.ended.signal()
        return self.status ?? -1
    }
}

/// A pipe whose ends are close-on-exec, made under the spawn lock so that no child started meanwhile inherits them:
/// for a child's output (``ChildProcess``'s `output:` gives the child a copy).
public func closeOnExecPipe() throws -> (read: CInt, write: CInt) {
    var ends: [CInt] = [0, 0]
    let created = ChildProcess.spawning.withLock { () -> Bool in
        guard pipe(&ends) == 0 else { return false }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return true
    }
    guard created else { throw SupportError("pipe failed: \(String(cString: strerror(errno)))") }
    return (ends[0], ends[1])
}

/// What a finished command printed and how it exited.
public struct Run: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a command to completion, capturing its output. Blocks: call it through ``onThread(_:)`` from async code.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func runProcess(_ path: String, _ arguments: [String]) throws -> Run {
    let outPipe = try closeOnExecPipe()
    let errPipe: (read: CInt, write: CInt)
    do {
        errPipe = try closeOnExecPipe()
    } catch {
        [outPipe.read, outPipe.write].forEach { close($0) }
        throw error
    }
    let (out, err) = ([outPipe.read, outPipe.write], [errPipe.read, errPipe.write])
    let child: ChildProcess
    do {
        child = try ChildProcess(path, arguments, output: out[1], error: err[1])
    } catch {
        [out[0], out[1], err[0], err[1]].forEach { close($0) }
        throw error
    }
    close(out[1])
    close(err[1])
    // Both pipes are drained at once: a child that fills one while we wait on the other would never finish.
    nonisolated(unsafe) var stderr: [UInt8] = []
    let stderrDone = DispatchSemaphore(value: 0)
    let errorPipe = err[0]
    Thread.detachNewThread {
        stderr = readAll(errorPipe)
        stderrDone.signal()
    }
    let stdout = readAll(out[0])
    stderrDone.wait()
    close(out[0])
    close(err[0])
    return Run(
        status: child.wait(),
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self)
    )
}

private func readAll(_ fd: CInt) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        if count <= 0 { return bytes }
        bytes += chunk[..<count]
    }
}

/// A copy of a build product in `directory`, which other users can execute (the build directory may not be
/// theirs to enter).
///
/// A child spawned while the copy is open for writing would hold it open until it execs, and an exec of the copy
/// meanwhile fails with ETXTBSY. The copy (tens of megabytes, seconds on a busy disk) is written beside its name,
/// close-on-exec, outside the spawn lock, which every start of a process takes and which async tests wait for
/// on the concurrency pool's few threads. Children are spawned under the lock, and a spawn returns once its child
/// has exec'd (closing what it inherited): so once the copy is closed, taking the lock waits out any child that
/// could still hold it, and the copy is renamed to its name then.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func executableCopy(of product: String, in directory: TemporaryDirectory) throws -> String {
    chmod(directory.path, 0o755)
    let copy = directory.file(product)
    if FileManager.default.fileExists(atPath: copy) { return copy }
    let beside = copy + ".copying-\(UInt64.random(in: 0...UInt64.max))"
    defer { unlink(beside) }  // nothing once renamed
    let source = open(BuildProducts.path(of: product), O_RDONLY | O_CLOEXEC)
    guard source >= 0 else { throw SupportError("open \(BuildProducts.path(of: product)): \(String(cString: strerror(errno)))") }
    defer { close(source) }
    let target = open(beside, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
    guard target >= 0 else { throw SupportError("open \(beside): \(String(cString: strerror(errno)))") }
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    var failure: CInt?
    copying: while failure == nil {
        let count = chunk.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        if count < 0 { failure = errno }
        if count <= 0 { break }
        var offset = 0
        while offset < count {
            let written = chunk.withUnsafeBytes { write(target, $0.baseAddress! + offset, count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                failure = errno
                continue copying
            }
            offset += written
        }
    }
    close(target)
    if let failure { throw SupportError("copy to \(beside): \(String(cString: strerror(failure)))") }
    try ChildProcess.spawning.withLock {
        guard rename(beside, copy) == 0 else { throw SupportError("rename \(beside): \(String(cString: strerror(errno)))") }
    }
    return copy
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not export.
private let closeFromAction: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
        fatalError("glibc 2.34 or later is needed: posix_spawn_file_actions_addclosefrom_np is missing")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
}()

/// Runs one SQL statement, with `parameters` bound to its `?`s, on the database of a daemon that is stopped (Python's
/// sqlite3, a writer other than the daemon's own), and commits it: how the tests damage or age a store.
/// - Throws: when the statement fails, with Python's error.
@available(*, noasync, message: "it waits for a process: from async code, call it on a thread of its own")
public func editStore(_ database: String, _ statement: String, _ parameters: [String] = []) throws {
    let script = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(sys.argv[2], sys.argv[3:]); db.commit()"
    let run = try runProcess("/usr/bin/python3", ["-c", script, database, statement] + parameters)
    guard run.status == 0 else { throw SupportError("the store edit '\(statement)' failed: \(run.stderr)") }
}
