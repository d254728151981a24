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

    /// Writes `text` to the file `name`, creating the directories above it.
    public func write(_ name: String, _ text: String) throws {
        let path = self.file(name)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}
