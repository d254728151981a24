#if canImport(Glibc)
import Glibc
#endif

/// A failed system call on a socket, with the errno it gave.
public struct UnixSocketError: Error, Hashable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var errno: CInt

    public var description: String { "\(self.operation) \(self.path): \(String(cString: strerror(self.errno)))" }
}

/// Blocking Unix stream socket calls for clients: the CLI, tests and benchmarks, which wait for each answer anyway.
enum UnixSocket {
    /// Connects a stream socket to `path`.
    static func connect(path: String) throws(UnixSocketError) -> CInt {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw UnixSocketError(operation: "socket", path: path, errno: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            close(fd)
            throw UnixSocketError(operation: "connect", path: path, errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw UnixSocketError(operation: "connect", path: path, errno: code)
        }
        return fd
    }

    /// Writes all of `bytes`, retrying on short writes and interrupts.
    static func writeAll(_ fd: CInt, _ bytes: [UInt8]) -> CInt? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return nil
    }
}
