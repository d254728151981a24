#if canImport(Glibc)
import Glibc
#endif

/// A libsystemd call that failed, with the negative errno it returned turned positive.
public struct SystemdError: Error, Hashable, CustomStringConvertible {
    public var operation: String
    public var errno: Int32
    /// For bus calls: the D-Bus error name and message the peer replied with.
    public var busError: String?

    public init(operation: String, errno: Int32, busError: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.busError = busError
    }

    public var description: String {
        "\(self.operation): \(self.busError ?? self.reason)"
    }

    /// What ``errno`` means, in strerror(3)'s words ("No such file or directory"), for a message of the caller's own.
    public var reason: String { Self.reason(self.errno) }

    /// What the errno `code` means, in strerror(3)'s words: for a code a caller was handed without an error (a
    /// pthread call's result, say).
    public static func reason(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// Throws when a libsystemd return value is negative.
    @discardableResult
    static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(SystemdError) -> Int32 {
        guard result >= 0 else { throw SystemdError(operation: operation(), errno: -result) }
        return result
    }
}

extension Duration {
    /// Microseconds as libsystemd's timeouts take them; a negative duration is zero.
    var systemdMicroseconds: UInt64 {
        let (seconds, attoseconds) = self.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds) / 1_000_000_000_000
    }
}
