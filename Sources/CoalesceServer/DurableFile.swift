#if canImport(Glibc)
import Glibc
#endif

/// Files replaced whole and durably: the new contents go to a temporary file that is flushed and renamed over the
/// old one, and the directory is flushed, so a crash leaves the old contents or the new, never half.
enum DurableFile {
    /// Why a file could not be read or replaced.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func replace(_ path: String, with bytes: [UInt8], mode: mode_t = 0o600) throws(Failure) {
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw self.failure("create", temporary) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let failure = self.failure("write", temporary)
                close(fd)
                unlink(temporary)
                throw failure
            }
            offset += written
        }
        guard fsync(fd) == 0 else {
            let failure = self.failure("flush", temporary)
            close(fd)
            unlink(temporary)
            throw failure
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw self.failure("replace", path) }
        try self.flushDirectory(of: path)
    }

    /// Removes a file durably; a file that is not there is fine.
    static func remove(_ path: String) throws(Failure) {
        guard unlink(path) == 0 || errno == ENOENT else { throw self.failure("remove", path) }
        try self.flushDirectory(of: path)
    }

    /// The whole file; `nil` when it does not exist.
    static func read(_ path: String) throws(Failure) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw self.failure("read", path)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw self.failure("read", path) }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
    }

    private static func flushDirectory(of path: String) throws(Failure) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }  // the rename stands; only its durability is not confirmed
        defer { close(fd) }
        // A file system that cannot flush directories (EINVAL) keeps the rename anyway.
        if fsync(fd) != 0, errno != EINVAL { throw self.failure("flush", directory) }
    }

    private static func failure(_ operation: String, _ path: String) -> Failure {
        Failure(description: "cannot \(operation) \(path): \(String(cString: strerror(errno)))")
    }
}

/// The data apps keep with SaveState: one file per app under `saved-state/` in the state directory.
struct SavedStateStore: Sendable {
    let directory: String

    init(stateDirectory: String) {
        self.directory = stateDirectory + "/saved-state"
    }

    func load(_ app: String) throws(DurableFile.Failure) -> String? {
        guard let bytes = try DurableFile.read(self.path(app)) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Keeps `data` for the app, or forgets what it kept when `data` is nil; on disk before it returns.
    func save(_ app: String, _ data: String?) throws(DurableFile.Failure) {
        if mkdir(self.directory, 0o700) != 0, errno != EEXIST {
            throw DurableFile.Failure(description: "cannot create \(self.directory): \(String(cString: strerror(errno)))")
        }
        if let data {
            try DurableFile.replace(self.path(app), with: Array(data.utf8))
        } else {
            try DurableFile.remove(self.path(app))
        }
    }

    // App names are reverse-DNS (no slash, no leading dot): safe as file names.
    private func path(_ app: String) -> String { self.directory + "/" + app }
}
