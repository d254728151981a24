import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// An eventfd one thread waits on (with poll, beside other descriptors) and any other thread sets.
public final class Wakeup: @unchecked Sendable {
    public let descriptor: Int32

    public init() throws(SystemdError) {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard descriptor >= 0 else { throw SystemdError(operation: "eventfd", errno: errno) }
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
    }

    /// Makes the descriptor readable until ``clear()``.
    public func set() {
        var one: UInt64 = 1
        _ = write(self.descriptor, &one, 8)
    }

    public func clear() {
        var value: UInt64 = 0
        _ = read(self.descriptor, &value, 8)
    }
}
