#if canImport(Glibc)
import Glibc
#endif

/// Why a client call did not get an answer.
public enum VarlinkClientError: Error, Hashable, CustomStringConvertible {
    /// The socket could not be connected.
    case cannotConnect(path: String, errno: CInt)
    /// Reading or writing failed, or the server hung up before answering.
    case connectionLost(String)
    /// The server's bytes are not a Varlink reply.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .cannotConnect(let path, let code): return "cannot connect to \(path): \(String(cString: strerror(code)))"
        case .connectionLost(let reason): return "connection lost: \(reason)"
        case .protocolViolation(let reason): return "not a Varlink reply: \(reason)"
        }
    }
}

/// A blocking Varlink client over a Unix socket: one call at a time, replies read as they come.
///
/// Meant for command-line tools, tests and benchmarks; not for use from an event loop.
public final class VarlinkClient {
    public let path: String
    private let fd: CInt
    /// What was read and not yet returned is `buffer[unread...]`: a frame is taken by moving `unread` past it, not by
    /// moving the rest of the buffer up (64 pipelined replies would otherwise cost 64 moves of what follows them).
    private var buffer: [UInt8] = []
    private var unread = 0
    /// Reused for every read, so a round trip allocates nothing for its socket I/O.
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private var closed = false
    private let maximumMessageSize: Int

    /// Connects to the server at `path`.
    /// - Throws: ``VarlinkClientError/cannotConnect(path:errno:)``.
    public init(path: String, maximumMessageSize: Int = 16 << 20) throws(VarlinkClientError) {
        do {
            self.fd = try UnixSocket.connect(path: path)
        } catch {
            throw .cannotConnect(path: path, errno: error.errno)
        }
        self.path = path
        self.maximumMessageSize = maximumMessageSize
    }

    deinit {
        close(self.fd)
    }

    /// The socket, for waiting on several clients at once with poll(2).
    public var descriptor: CInt { self.fd }

    /// Whether more from the server is already here: a whole message read and not yet returned, or bytes waiting on
    /// the socket. Lets a reader of a stream tell a burst (a wake's events) from its end, without waiting.
    public var hasPendingInput: Bool {
        if self.buffer[self.unread...].contains(0) { return true }
        var descriptor = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0 && descriptor.revents & Int16(POLLIN) != 0
    }

    /// Bounds how long a read waits for the server.
    public func setReceiveTimeout(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        _ = setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Calls a method and returns its reply parameters.
    /// - Throws: the server's error reply as ``VarlinkError``, or ``VarlinkClientError``.
    @available(*, noasync, message: "it blocks its thread until the server answers: from async code, call it on a thread of its own")
    public func call(_ method: String, _ parameters: JSONObject = [:]) throws -> JSONObject {
        try self.send(VarlinkCall(method: method, parameters: parameters))
        let reply = try self.receiveReply()
        if let error = reply.error { throw VarlinkError(name: error, parameters: reply.parameters) }
        return reply.parameters
    }

    /// Calls a method with `more` and hands each reply to `body` until the last one.
    /// - Throws: the server's error reply as ``VarlinkError``, or ``VarlinkClientError``.
    @available(*, noasync, message: "it blocks its thread until the server answers: from async code, call it on a thread of its own")
    public func callMore(
        _ method: String,
        _ parameters: JSONObject = [:],
        body: (JSONObject) throws -> Void
    ) throws {
        try self.send(VarlinkCall(method: method, parameters: parameters, more: true))
        while true {
            let reply = try self.receiveReply()
            if let error = reply.error { throw VarlinkError(name: error, parameters: reply.parameters) }
            try body(reply.parameters)
            if !reply.continues { return }
        }
    }

    /// Sends a call without waiting for anything.
    public func send(_ call: VarlinkCall) throws(VarlinkClientError) {
        var bytes: [UInt8] = []
        call.message.write(to: &bytes)
        bytes.append(0)
        try self.sendRaw(bytes)
    }

    /// Sends bytes as they are: for tests that speak broken Varlink on purpose.
    public func sendRaw(_ bytes: [UInt8]) throws(VarlinkClientError) {
        if let code = UnixSocket.writeAll(self.fd, bytes) {
            throw .connectionLost("write: \(String(cString: strerror(code)))")
        }
    }

    /// Reads the next reply.
    @available(*, noasync, message: "it blocks its thread until the server answers: from async code, call it on a thread of its own")
    public func receiveReply() throws(VarlinkClientError) -> VarlinkReply {
        let frame = try self.receiveFrame()
        do {
            return try VarlinkReply(message: try JSONParser.parse(frame))
        } catch let error as JSONParseError {
            throw .protocolViolation(error.description)
        } catch {
            throw .protocolViolation("\(error)")
        }
    }

    /// Reads the next NUL-terminated message, without its NUL.
    @available(*, noasync, message: "it blocks its thread until the server answers: from async code, call it on a thread of its own")
    public func receiveFrame() throws(VarlinkClientError) -> [UInt8] {
        var searchFrom = self.unread
        while true {
            if let nul = self.buffer[searchFrom...].firstIndex(of: 0) {
                let frame = Array(self.buffer[self.unread..<nul])
                self.unread = nul + 1
                if self.unread == self.buffer.count {
                    self.buffer.removeAll(keepingCapacity: true)
                    self.unread = 0
                }
                return frame
            }
            guard self.buffer.count - self.unread <= self.maximumMessageSize else {
                throw .protocolViolation("reply larger than \(self.maximumMessageSize) bytes")
            }
            guard !self.closed else { throw .connectionLost("the server closed the connection") }
            // Only a partial frame is left: move it to the front before reading more.
            if self.unread > 0 {
                self.buffer.removeSubrange(..<self.unread)
                self.unread = 0
            }
            searchFrom = self.buffer.count
            let count = self.chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .connectionLost("timed out waiting for a reply") }
                throw .connectionLost("read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { self.closed = true; continue }
            self.buffer.append(contentsOf: self.chunk[..<count])
        }
    }

    /// Whether the server has closed the connection; waits up to `timeout` for it to happen.
    @available(*, noasync, message: "it blocks its thread until the server answers: from async code, call it on a thread of its own")
    public func waitForClose(timeout: Duration) -> Bool {
        self.setReceiveTimeout(timeout)
        while true {
            do {
                _ = try self.receiveFrame()
            } catch .connectionLost(let reason) {
                return !reason.contains("timed out")
            } catch {
                return false
            }
        }
    }
}
