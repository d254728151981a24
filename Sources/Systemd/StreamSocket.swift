// SOCK_STREAM and SOCK_CLOEXEC come from the socket header libsystemd's headers include first: a whole-module
// (release) build finds them only through CSystemd.
import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A client's connection to a Unix stream socket that speaks a protocol of its own (a compositor's IPC): written
/// whole, read as bytes come, for a thread that polls its ``descriptor`` beside others.
///
/// Reads never block: a poll says when there is something to read.
public final class StreamSocket {
    private let owned: OwnedDescriptor
    /// The socket's path, for messages.
    public let path: String

    /// Connects to the socket at `path`.
    /// - Throws: ``SystemdError`` naming the path: `ENOENT` (nothing listens there), `ECONNREFUSED`, `EACCES`,
    ///   `ENAMETOOLONG` (longer than a socket address holds).
    public init(path: String) throws(SystemdError) {
        self.path = path
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemdError(operation: "socket for \(path)", errno: errno) }
        self.owned = OwnedDescriptor(descriptor)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw SystemdError(operation: "connect to \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else { throw SystemdError(operation: "connect to \(path)", errno: errno) }
        // Non-blocking from here: a read takes what is there; a write waits for room itself.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    /// The descriptor to poll for ``Poll/Events/readable``; -1 once closed.
    public var descriptor: CInt { self.owned.descriptor }

    /// Writes all of `bytes`, waiting for room as the peer reads.
    /// - Throws: ``SystemdError``: `EPIPE` once the peer has gone.
    public func write(_ bytes: [UInt8]) throws(SystemdError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                send(self.descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written >= 0 {
                offset += written
                continue
            }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else {
                throw SystemdError(operation: "write to \(self.path)", errno: code)
            }
            do throws(SystemdError) {
                _ = try Poll.wait([(self.descriptor, Events.writable)], timeout: nil)
            } catch where error.errno == EINTR {}
        }
    }

    /// What has come, at most `limit` bytes: empty when nothing waits.
    /// - Throws: ``SystemdError``: `ECONNRESET` and, for a peer that closed the connection, `EPIPE`.
    public func read(limit: Int = 1 << 16) throws(SystemdError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: limit)
        while true {
            let count = bytes.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { return Array(bytes[..<count]) }
            if count == 0 { throw SystemdError(operation: "read from \(self.path): the peer closed it", errno: EPIPE) }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return [] }
            throw SystemdError(operation: "read from \(self.path)", errno: code)
        }
    }

    /// Waits at most `timeout` for something to read; `false` when nothing came.
    public func waitReadable(timeout: Duration) throws(SystemdError) -> Bool {
        while true {
            do throws(SystemdError) {
                return try !Poll.wait([(self.descriptor, .readable)], timeout: timeout)[0].isEmpty
            } catch where error.errno == EINTR {
                continue
            }
        }
    }

    public func close() {
        self.owned.close()
    }

    private typealias Events = Poll.Events
}

extension Poll.Events {
    /// There is room to write (`POLLOUT`).
    public static let writable = Poll.Events(rawValue: Int16(POLLOUT))
}
