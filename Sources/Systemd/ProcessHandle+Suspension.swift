#if canImport(Glibc)
import Glibc
#endif

extension ProcessHandle {
    /// Whether the process is stopped by a signal (SIGSTOP): state `T` in /proc/PID/stat; `false` once it is gone.
    public var isStopped: Bool {
        guard let stat = self.procFile("stat"), let end = stat.lastIndex(of: ")") else { return false }
        // After the command name (which may hold spaces) comes the state, field 3.
        return stat[stat.index(after: end)...].split(separator: " ").first == "T"
    }

    /// The process's control group in the unified hierarchy (the `0::` line of /proc/PID/cgroup), such as
    /// `/system.slice/example.service`; `nil` once it is gone or where there is no unified hierarchy.
    public var controlGroup: String? {
        guard let lines = self.procFile("cgroup")?.split(separator: "\n"),
            let line = lines.first(where: { $0.hasPrefix("0::") })
        else { return nil }
        return String(line.dropFirst(3))
    }

    /// Whether the process runs in `unit` (its control group is the unit's, or one below it).
    public func runs(in unit: String) -> Bool {
        self.controlGroup?.split(separator: "/").contains { $0 == unit } ?? false
    }

    /// Whether the process's control group is frozen by the cgroup freezer (`frozen 1` in its `cgroup.events`),
    /// looked for where the unified hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid
    /// system); `false` once it is gone.
    public var isFrozen: Bool {
        guard let group = self.controlGroup else { return false }
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let fd = open(root + group + "/cgroup.events", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return false }
            return String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").contains("frozen 1")
        }
        return false
    }
}
