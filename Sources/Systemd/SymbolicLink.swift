#if canImport(Glibc)
import Glibc
#endif

/// Where symbolic links lead: the machine's zone is a link (`/etc/localtime`), and the directory it leads into may
/// be reached through another (`/usr/share/zoneinfo` on a merged /usr).
public enum SymbolicLink {
    /// The target written in the link at `path`, as it is written (relative targets count from the link's
    /// directory): bytes, as a target need not be UTF-8.
    /// - Throws: ``SystemdError`` from `readlink`: `EINVAL` when `path` is not a link, `ENOENT`.
    public static func target(of path: String) throws(SystemdError) -> [UInt8] {
        // A link's target is shorter than PATH_MAX; one byte more would show a longer one as cut.
        var target = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = target.withUnsafeMutableBytes { readlink(path, $0.baseAddress!, $0.count - 1) }
        guard length >= 0 else { throw SystemdError(operation: "readlink(\(path))", errno: errno) }
        return Array(target[..<length])
    }

    /// `path` made absolute, with every link on the way followed and `.` and `..` worked out (realpath(3)).
    /// - Throws: ``SystemdError`` from `realpath`: `ENOENT` for a path that leads nowhere (a dangling link on the
    ///   way), `ELOOP`.
    public static func resolved(_ path: String) throws(SystemdError) -> String {
        guard let resolved = realpath(path, nil) else {
            throw SystemdError(operation: "realpath(\(path))", errno: errno)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
