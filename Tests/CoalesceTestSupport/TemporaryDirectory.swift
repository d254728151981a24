import Foundation

/// A temporary directory, removed with everything in it when the value goes away: the one place tests, the
/// daemons they start and the bench keep files.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init() throws {
        // Short, because Unix socket paths are limited to 107 bytes.
        var template = Array("/tmp/coalesced-XXXXXX".utf8CString)
        guard let result = mkdtemp(&template) else {
            throw SupportError("mkdtemp in /tmp failed: \(String(cString: strerror(errno)))")
        }
        self.path = String(cString: result)
    }

    deinit {
        // A file a test's child process still holds open is removed anyway; what cannot be is left to /tmp's cleaner.
        try? FileManager.default.removeItem(atPath: self.path)
    }

    /// The path of `name` (which may hold slashes) inside the directory; nothing is created.
    public func file(_ name: String) -> String { self.path + "/" + name }

    /// Creates the directory `name` inside, and those above it, with `mode`; returns its path.
    @discardableResult
    public func directory(_ name: String, mode: Int = 0o755) throws -> String {
        let path = self.file(name)
        try FileManager.default.createDirectory(
            atPath: path,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: mode]
        )
        return path
    }

    /// Writes `text` to the file `name`, creating the directories above it. Atomic (written beside it, then renamed
    /// over it), and not synced: Foundation's atomic write syncs the file, which on a machine busy with a test run's
    /// daemons takes seconds, and a test's files need not outlive a crash. Tests start daemons (which write their
    /// configuration here) straight from async code, on one of the concurrency pool's few threads.
    public func write(_ name: String, _ text: String) throws {
        let path = self.file(name)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        let beside = path + ".writing"
        let descriptor = open(beside, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SupportError("open \(beside): \(String(cString: strerror(errno)))") }
        let failure = Array(text.utf8).withUnsafeBytes { bytes -> CInt? in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return errno }
                offset += written
            }
            return nil
        }
        close(descriptor)
        if let failure { throw SupportError("write \(beside): \(String(cString: strerror(failure)))") }
        guard rename(beside, path) == 0 else { throw SupportError("rename \(beside): \(String(cString: strerror(errno)))") }
    }
}
