import Foundation

/// A memory cgroup for real memory pressure: a process in it that fills its limit with file pages stalls in
/// reclaim, which the machine's PSI (`/proc/pressure/memory`) counts.
public final class MemoryCgroup: Sendable {
    public let path: String
    /// Its `cgroup.procs`: a process that writes its pid there moves in.
    public let procs: String

    /// cgroup v1's memory controller (this machine's hybrid layout) or cgroup v2's; `nil` where neither can be
    /// used (not root, no memory controller).
    public init?(name: String, limit: Int) {
        guard getuid() == 0 else { return nil }
        let v1 = "/sys/fs/cgroup/memory"
        if FileManager.default.fileExists(atPath: v1 + "/memory.limit_in_bytes") {
            self.path = v1 + "/" + name
            guard mkdir(self.path, 0o755) == 0 else { return nil }
            self.procs = self.path + "/cgroup.procs"
            guard (try? "\(limit)".write(toFile: self.path + "/memory.limit_in_bytes", atomically: false, encoding: .utf8)) != nil
            else {
                rmdir(self.path)
                return nil
            }
            return
        }
        let v2 = "/sys/fs/cgroup"
        guard let controllers = try? String(contentsOfFile: v2 + "/cgroup.subtree_control", encoding: .utf8),
            controllers.split(separator: " ").contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "memory" })
        else { return nil }
        self.path = v2 + "/" + name
        guard mkdir(self.path, 0o755) == 0 else { return nil }
        self.procs = self.path + "/cgroup.procs"
        guard (try? "\(limit)".write(toFile: self.path + "/memory.max", atomically: false, encoding: .utf8)) != nil else {
            rmdir(self.path)
            return nil
        }
    }

    /// Kills every process in it and removes it, within ten seconds; false if it could not.
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func remove() -> Bool {
        self.killProcesses() && (rmdir(self.path) == 0 || errno == ENOENT)
    }

    /// Kills every process in it, and waits up to ten seconds for it to hold none; false if it still does.
    @discardableResult
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func killProcesses() -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard let text = try? String(contentsOfFile: self.procs, encoding: .utf8) else { return true }  // gone
            let pids = text.split(separator: "\n").compactMap { Int32($0) }
            if pids.isEmpty { return true }
            for pid in pids { kill(pid, SIGKILL) }
            usleep(20_000)
        }
        return false
    }

    /// Starts a process in the cgroup that writes a 128 MiB `file` and then reads it over and over: with a limit
    /// well under that, it stalls in reclaim for as long as it runs, at most `seconds` (should its caller die
    /// first). ``remove()`` kills it.
    public func hog(file: String, seconds: Int = 120) throws -> ChildProcess {
        let script = """
            echo $$ > \(self.procs) || exit 1
            dd if=/dev/zero of=\(file) bs=1M count=128 conv=fsync status=none
            exec timeout \(seconds) sh -c 'while :; do cat \(file) > /dev/null; done'
            """
        return try ChildProcess("/bin/sh", ["-c", script])
    }
}

