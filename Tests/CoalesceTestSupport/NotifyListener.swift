#if canImport(Glibc)
import Glibc
#endif

/// The receiving end of `NOTIFY_SOCKET`: what a service manager would see from `sd_notify`.
public final class NotifyListener: @unchecked Sendable {
    // Used from one test at a time; the fd is only read by the owner.
    public let path: String
    private let fd: CInt
    /// Every datagram received so far, in order.
    public private(set) var messages: [String] = []

    public init(path: String) throws {
        self.path = path
        self.fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.fd >= 0 else { throw SupportError("socket: \(String(cString: strerror(errno)))") }
        try bindUnixSocket(self.fd, path: path)
    }

    deinit {
        close(self.fd)
        unlink(self.path)
    }

    /// Receives one datagram, waiting at most `timeout`; `nil` if none came.
    public func receive(timeout: Duration) -> String? {
        var poller = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&poller, 1, milliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let message = String(decoding: buffer[..<count], as: UTF8.self)
        self.messages.append(message)
        return message
    }

    /// Receives until a datagram satisfies `predicate`, for at most `timeout` in all; returns that datagram.
    public func waitFor(timeout: Duration, _ predicate: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let message = self.receive(timeout: deadline - ContinuousClock.now) else { return nil }
            if predicate(message) { return message }
        }
        return nil
    }

    /// Receives until a datagram contains the line `assignment` (such as `READY=1`).
    public func waitFor(_ assignment: String, timeout: Duration = .seconds(20)) -> String? {
        self.waitFor(timeout: timeout) { $0.split(separator: "\n").contains(Substring(assignment)) }
    }
}

public struct SupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Binds a socket to a Unix socket path.
public func bindUnixSocket(_ fd: CInt, path: String) throws {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
        throw SupportError("socket path too long: \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: path.utf8)
        raw[path.utf8.count] = 0
    }
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard result == 0 else { throw SupportError("bind \(path): \(String(cString: strerror(errno)))") }
}
