#if canImport(Glibc)
import Glibc
#endif

/// Replaces a small file whole, durably: written beside it, synced, renamed over it, the directory synced, so
/// that a crash at any point leaves the old contents or the new, never a mix or nothing.
public enum ReplacedFile {
    /// Makes `contents` the file `name` in `directory`, through `name.new` beside it (mode 0600).
    /// - Throws: ``FileError`` on the path that failed: `name.new` when it cannot be written or synced (it is
    ///   removed again), `name` when the rename fails, `directory` when it cannot be synced. A full disk is
    ///   ``FileError/isDiskFull``.
    public static func replace(_ name: String, in directory: String, with contents: [UInt8]) throws(FileError) {
        let path = directory + "/" + name
        let temporary = path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileError(operation: "open", path: temporary, errno: errno) }
        // One write: the file is a line or two, which a regular file takes whole or fails.
        let written = contents.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == contents.count, fsync(descriptor) == 0 else {
            let operation = written == contents.count ? "fsync" : "write"
            let error = FileError(operation: operation, path: temporary, errno: errno)
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else { throw FileError(operation: "rename", path: path, errno: errno) }
        // The rename is durable once the directory is.
        let parent = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { throw FileError(operation: "open", path: directory, errno: errno) }
        defer { close(parent) }
        guard fsync(parent) == 0 else { throw FileError(operation: "fsync", path: directory, errno: errno) }
    }
}
