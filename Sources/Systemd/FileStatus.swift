#if canImport(Glibc)
import Glibc
#endif

/// What stat(2) says of a path: what kind of file it is and how large, without opening it (a FIFO's open would
/// wait for a writer).
public struct FileStatus: Sendable, Hashable {
    /// What kind of file a path names.
    public enum Kind: Sendable, Hashable {
        case regular
        case directory
        /// Seen only when links are not followed.
        case symbolicLink
        /// A FIFO, a device, a socket.
        case other
    }

    public var kind: Kind
    /// Its size in bytes.
    public var size: Int

    /// The status of `path`.
    /// - Parameters:
    ///   - path: the file.
    ///   - followingLinks: whether a symbolic link is followed (`stat`) or reported as one (`lstat`).
    /// - Throws: ``SystemdError`` from `stat` or `lstat` (`ENOENT`, `ENOTDIR`, `EACCES`).
    public init(at path: String, followingLinks: Bool = true) throws(SystemdError) {
        var status = stat()
        guard (followingLinks ? stat(path, &status) : lstat(path, &status)) == 0 else {
            throw SystemdError(operation: "\(followingLinks ? "stat" : "lstat")(\(path))", errno: errno)
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: self.kind = .regular
        case S_IFDIR: self.kind = .directory
        case S_IFLNK: self.kind = .symbolicLink
        default: self.kind = .other
        }
        self.size = Int(status.st_size)
    }
}
