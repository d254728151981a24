/// A file-system call that failed on a path: the path, so that a message can name the file a person must look at
/// (it may be a parent of the one asked for), and the errno.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that failed (`mkdir`, `rename`, `fsync`).
    public var operation: String
    /// The path it failed on.
    public var path: String
    public var errno: Int32

    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// What ``errno`` means, in strerror(3)'s words.
    public var reason: String { SystemdError.reason(self.errno) }

    /// Whether the disk (or the user's quota on it) is full: the one failure a person fixes by making room.
    public var isDiskFull: Bool { self.errno == Errno.ENOSPC || self.errno == Errno.EDQUOT }

    /// `/var/lib/coalesced: Permission denied`.
    public var description: String { "\(self.path): \(self.reason)" }
}
