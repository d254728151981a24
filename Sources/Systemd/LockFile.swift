#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock(2)` on a file of its own, held until this value goes or the process ends (the kernel
/// releases it however the process dies), with the holder's pid written in the file so that a process refused can
/// say who holds it.
///
/// A flock belongs to the open file description, which only this value holds (close-on-exec, so no child inherits
/// it); a POSIX record lock would be released when the process closes *any* descriptor of the file.
public final class LockFile: Sendable {
    /// Why the lock was not taken.
    public enum Failure: Error, Sendable, Hashable {
        /// Another process holds it: its pid, when it has written it yet.
        case held(pid: Int32?)
        /// The file cannot be opened or locked: the errno.
        case failed(errno: Int32)

        /// For ``failed(errno:)``: what the errno means, in strerror(3)'s words.
        public var reason: String {
            switch self {
            case .held(let pid): "held by " + (pid.map { "pid \($0)" } ?? "another process")
            case .failed(let code): SystemdError.reason(code)
            }
        }
    }

    /// The lock file's path.
    public let path: String
    private let descriptor: Int32

    /// Takes the lock on `path` (created with mode 0600), without waiting.
    /// - Throws: ``Failure/held(pid:)`` when another process holds it, ``Failure/failed(errno:)`` when the file
    ///   cannot be opened or locked.
    public init(path: String) throws(Failure) {
        self.path = path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .failed(errno: errno) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            let holder = Self.pid(in: descriptor)
            close(descriptor)
            guard failure == EWOULDBLOCK else { throw .failed(errno: failure) }
            throw .held(pid: holder)
        }
        self.descriptor = descriptor
        // Only for the message of a process refused: if this write fails, that message names no pid. Written over
        // the pid before it and then cut to length, not into an emptied file: on a full disk the file's block is
        // all there is to write into.
        let line = "\(getpid())\n"
        let written = line.withCString { pwrite(descriptor, $0, strlen($0), 0) }
        _ = ftruncate(descriptor, off_t(max(written, 0)))
    }

    deinit {
        close(self.descriptor)
    }

    /// The pid the holder wrote, if it has written it yet.
    private static func pid(in descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return text.split(separator: "\n").first.flatMap { Int32($0) }.flatMap { $0 > 0 ? $0 : nil }
    }
}
