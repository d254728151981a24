import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// This process as a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process that one of its descendants leaves
/// behind when it exits comes back to it, rather than to init, so that it can be waited for, killed and reaped.
///
/// - Important: A subreaper must reap what comes back to it, or it stays a zombie.
public enum Subreaper {
    /// Makes this process a subreaper, for the rest of its life. Idempotent.
    /// - Throws: ``SystemdError`` when the kernel refuses (a seccomp filter without `prctl`).
    public static func become() throws(SystemdError) {
        guard coalesced_set_child_subreaper() == 0 else {
            throw SystemdError(operation: "become a child subreaper", errno: errno)
        }
    }

    /// The pids of this process's children, those of all its threads, from `/proc/self/task/*/children`; empty
    /// when the kernel does not list children (built without `CONFIG_PROC_CHILDREN`).
    public static func children() -> [Int32] {
        guard let directory = opendir("/proc/self/task") else { return [] }
        defer { closedir(directory) }
        var children: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard Int32(name) != nil, let text = ProcessHandle.readFile("/proc/self/task/\(name)/children") else { continue }
            children += text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
        }
        return children
    }

    /// Reaps those of `children` that have ended and whose process group `isReapable` accepts; a child that still
    /// runs, or is gone already, is left.
    /// - Parameters:
    ///   - children: pids of this process's children (``children()``).
    ///   - isReapable: given a child's process group, whether it may be reaped here (a group someone else waits for
    ///     is not: it would lose that child's status).
    public static func reapEnded(_ children: [Int32], where isReapable: (_ group: Int32) -> Bool) {
        for child in children {
            let group = getpgid(child)
            guard group > 0, isReapable(group) else { continue }
            var status: CInt = 0
            _ = waitpid(child, &status, WNOHANG)
        }
    }
}
