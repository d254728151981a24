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
        guard let status = self.procFile("status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
        else { return nil }
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { UInt32($0) }
    }

    /// The process's supplementary groups, from /proc (what it has now, not what the user database says);
    /// `nil` once it is gone.
    public var groups: [UInt32]? {
        guard let status = self.procFile("status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") })
        else { return nil }
        var groups: [UInt32] = []
        for field in line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst() {
            guard let group = UInt32(field) else { return nil }  // not what /proc writes: trust none of it
            groups.append(group)
        }
        return groups
    }

    /// A small file of /proc/PID, read while the process is known to be alive (after a pid's reuse it would
    /// describe another process).
    func procFile(_ name: String) -> String? {
        guard let contents = Self.readFile("/proc/\(self.pid)/\(name)"), self.isAlive else { return nil }
        return contents
    }

    /// A small file read to its end (a status with many groups is longer than one read's worth); `nil` when it
    /// cannot be read or is empty.
    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            contents.append(contentsOf: chunk[..<count])
        }
        return contents.isEmpty ? nil : String(decoding: contents, as: UTF8.self)
    }

    /// Sends `signal`. Returns whether it was delivered: `false` once the process has exited.
    @discardableResult
    public func signal(_ signal: ProcessSignal) -> Bool {
        pidfd_send_signal(self.descriptor, signal.number, nil, 0) == 0
    }

    /// Whether the process still runs (a zombie counts as gone: it runs no code).
    public var isAlive: Bool {
        var poll = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&poll, 1, 0) == 0
    }

    /// What tells this process from any other that had or will have its pid, in this boot or another: the boot's
    /// id and the process's start time (field 22 of /proc/PID/stat, clock ticks since boot); `nil` once it is
    /// gone. Kept across a restart of the daemon to find the same process again.
    public var identity: String? {
        guard let boot = Self.bootID, let stat = self.procFile("stat"), let end = stat.lastIndex(of: ")") else { return nil }
        // After the command name (which may hold spaces), the state is field 3: the start time is the 20th on.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 19, UInt64(fields[19]) != nil else { return nil }
        return "\(boot) \(fields[19])"
    }

    /// Whether processes have an ``identity``: this boot's id can be read (a unit with `ProcSubset=pid` hides it).
    public static var identifiesProcesses: Bool { Self.bootID != nil }

    /// This boot's id, from the kernel.
    private static let bootID: String? = {
        guard let text = ProcessHandle.readFile("/proc/sys/kernel/random/boot_id") else { return nil }
        let id = text.split(separator: "\n").first.map(String.init) ?? ""
        return id.isEmpty ? nil : id
    }()

    /// Resident memory in bytes, from /proc; `nil` once the process is gone.
    public var residentBytes: Int? {
        guard let fields = self.procFile("statm")?.split(separator: " "), fields.count > 1,
            let pages = Int(fields[1])
        else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
