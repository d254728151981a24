#if canImport(Glibc)
import Glibc
#endif

/// A file opened for reading, to be read whole into memory up to a bound: configuration, zone and pressure files,
/// each small, any of which a user may point at something that is not. Close-on-exec; closed when it goes.
public struct ReadableFile: ~Copyable {
    /// What kind of file a path leads to.
    public enum Kind: Sendable, Hashable {
        case regular
        case directory
        /// A FIFO, a device, a socket.
        case other
    }

    /// The path it was opened at, for errors.
    public let path: String
    private let owned: OwnedDescriptor

    /// Opens `path` for reading.
    /// - Parameters:
    ///   - path: the file.
    ///   - nonBlocking: `O_NONBLOCK`: opening a FIFO does not wait for a writer (and reading it then fails with
    ///     `EAGAIN` rather than waiting), for a caller that refuses any file but a regular one (``kind()``).
    /// - Throws: ``SystemdError`` from `open` (`ENOENT`, `ENOTDIR`, `EACCES`).
    public init(_ path: String, nonBlocking: Bool = false) throws(SystemdError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | (nonBlocking ? O_NONBLOCK : 0))
        guard descriptor >= 0 else { throw SystemdError(operation: "open(\(path))", errno: errno) }
        self.path = path
        self.owned = OwnedDescriptor(descriptor)
    }

    /// What the opened file is.
    /// - Throws: ``SystemdError`` from `fstat`.
    public func kind() throws(SystemdError) -> Kind {
        var status = stat()
        guard fstat(self.owned.descriptor, &status) == 0 else {
            throw SystemdError(operation: "fstat(\(self.path))", errno: errno)
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// The file's size in bytes now.
    /// - Throws: ``SystemdError`` from `fstat`.
    public func size() throws(SystemdError) -> Int {
        var status = stat()
        guard fstat(self.owned.descriptor, &status) == 0 else {
            throw SystemdError(operation: "fstat(\(self.path))", errno: errno)
        }
        return Int(status.st_size)
    }

    /// Reads `count` bytes from `offset` on, without moving the file's position (pread(2)): fewer when the file
    /// ends first, which the caller tells by the length.
    /// - Throws: ``SystemdError`` from `pread`; a read a signal interrupts is made again.
    public func read(_ count: Int, at offset: Int) throws(SystemdError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes {
                pread(self.owned.descriptor, $0.baseAddress! + done, count - done, off_t(offset + done))
            }
            if result < 0, errno == EINTR { continue }
            guard result >= 0 else { throw SystemdError(operation: "pread(\(self.path))", errno: errno) }
            if result == 0 { break }
            done += result
        }
        return done == count ? bytes : Array(bytes[..<done])
    }

    /// Reads to the end of the file, refusing a file longer than `limit` bytes.
    /// - Throws: ``SystemdError`` from `read`: `EFBIG` past `limit` (having read `limit` bytes and a little more,
    ///   never the rest), `EISDIR` for a directory; a read a signal interrupts is made again.
    public func readAll(limit: Int) throws(SystemdError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = try self.read(into: &chunk, from: 0)
            if count == 0 { return bytes }
            bytes += chunk[..<count]
            if bytes.count > limit { throw SystemdError(operation: "read(\(self.path))", errno: EFBIG) }
        }
    }

    /// Reads the first `count` bytes of the file, or all of it when it is shorter: for a file whose end may be
    /// left unread, such as a pressure file.
    /// - Throws: ``SystemdError`` from `read`; a read a signal interrupts is made again.
    public func readPrefix(_ count: Int) throws(SystemdError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = try self.read(into: &buffer, from: filled)
            if got == 0 { break }
            filled += got
        }
        return Array(buffer[..<filled])
    }

    /// One read(2) into `buffer` from `offset` on; 0 at the end of the file.
    private func read(into buffer: inout [UInt8], from offset: Int) throws(SystemdError) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in
                Glibc.read(self.owned.descriptor, raw.baseAddress! + offset, raw.count - offset)
            }
            if count >= 0 { return count }
            if errno != EINTR { throw SystemdError(operation: "read(\(self.path))", errno: errno) }
        }
    }

    /// The bytes of the file at `path`, refusing one longer than `limit` bytes (``readAll(limit:)``).
    /// - Throws: ``SystemdError`` from `open` or `read` (`EFBIG` past `limit`).
    public static func contents(of path: String, limit: Int) throws(SystemdError) -> [UInt8] {
        try ReadableFile(path).readAll(limit: limit)
    }
}
