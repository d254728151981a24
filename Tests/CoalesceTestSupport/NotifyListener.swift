import Foundation

/// The receiving end of `NOTIFY_SOCKET`: what a service manager would see from `sd_notify`.
///
/// Like a service manager, it reads every datagram as it comes (on a thread of its own) and keeps it for the test:
/// a daemon's `sd_notify` blocks once the socket's queue is full, and a listener that read only when asked would
/// end up freezing the daemon's event loop in a long test or benchmark.
public final class NotifyListener: @unchecked Sendable {
    public let path: String
    private let inbox = Inbox()

    /// Datagrams received and not yet handed out, shared with the reading thread.
    private final class Inbox: @unchecked Sendable {
        let condition = NSCondition()
        var unread: [String] = []
        var all: [String] = []
        var stopped = false
    }

    /// Every datagram handed out by ``receive(timeout:)`` so far, in order.
    public var messages: [String] { self.inbox.condition.withLock { self.inbox.all } }

    public init(path: String) throws {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SupportError("socket: \(String(cString: strerror(errno)))") }
        do {
            try bindUnixSocket(fd, path: path)
        } catch {
            close(fd)
            throw error
        }
        let inbox = self.inbox
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while !inbox.condition.withLock({ inbox.stopped }) {
                guard poll(&poller, 1, 100) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                let message = String(decoding: buffer[..<count], as: UTF8.self)
                inbox.condition.withLock {
                    inbox.unread.append(message)
                    inbox.condition.broadcast()
                }
            }
            close(fd)
        }
    }

    deinit {
        self.inbox.condition.withLock { self.inbox.stopped = true }
        unlink(self.path)
    }

    /// The next datagram, waiting at most `timeout`; `nil` if none came.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func receive(timeout: Duration) -> String? {
        try? waitUntil("a datagram", timeout: timeout, signalledBy: self.inbox.condition) { self.takeUnread() }
    }

    /// Receives until a datagram satisfies `predicate`, for at most `timeout` in all; returns that datagram.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitFor(timeout: Duration, _ predicate: (String) -> Bool) -> String? {
        try? waitUntil("a datagram that matches", timeout: timeout, signalledBy: self.inbox.condition) {
            while let message = self.takeUnread() {
                if predicate(message) { return message }
            }
            return nil
        }
    }

    /// Receives until a datagram contains the line `assignment` (such as `READY=1`).
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func waitFor(_ assignment: String, timeout: Duration = waitLimit) -> String? {
        self.waitFor(timeout: timeout) { $0.split(separator: "\n").contains(Substring(assignment)) }
    }

    /// Hands out the oldest datagram not yet handed out, if any. Called with the inbox's lock held.
    private func takeUnread() -> String? {
        guard !self.inbox.unread.isEmpty else { return nil }
        let message = self.inbox.unread.removeFirst()
        self.inbox.all.append(message)
        return message
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
