import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// A process the daemon may signal, held as a pidfd: once the process is gone, a signal reaches nobody rather than
/// whatever process the kernel gave its pid to next.
public final class ProcessHandle: Sendable {
    public let pid: Int32
    private let descriptor: CInt

    /// Opens a handle on a live process.
    /// - Throws: ``SystemdError`` when the process is gone already (ESRCH) or the kernel refuses.
    public init(pid: Int32) throws(SystemdError) {
        let descriptor = pidfd_open(pid, 0)
        guard descriptor >= 0 else { throw SystemdError(operation: "open a pidfd for \(pid)", errno: errno) }
        self.pid = pid
        self.descriptor = descriptor
    }

    /// Takes a handle on the process a pidfd names (such as a connection's SO_PEERPIDFD), keeping a duplicate.
    public init(duplicating pidfd: CInt, pid: Int32) throws(SystemdError) {
        let descriptor = fcntl(pidfd, F_DUPFD_CLOEXEC, 3)
        guard descriptor >= 0 else { throw SystemdError(operation: "duplicate the pidfd of \(pid)", errno: errno) }
        self.pid = pid
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
    }

    /// The real uid of the process, from /proc; `nil` once it is gone.
    public var uid: UInt32? {
        let fd = open("/proc/\(self.pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, self.isAlive else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else { return nil }
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { UInt32($0) }
    }

    /// Sends `signal`. Returns whether it was delivered: `false` once the process has exited.
    @discardableResult
    public func signal(_ signal: CInt) -> Bool {
        pidfd_send_signal(self.descriptor, signal, nil, 0) == 0
    }

    /// Whether the process still runs (a zombie counts as gone: it runs no code).
    public var isAlive: Bool {
        var poll = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&poll, 1, 0) == 0
    }

    /// Resident memory in bytes, from /proc; `nil` once the process is gone.
    public var residentBytes: Int? {
        let fd = open("/proc/\(self.pid)/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, self.isAlive else { return nil }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
