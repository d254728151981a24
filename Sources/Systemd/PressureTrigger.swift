#if canImport(Glibc)
import Glibc
#endif

/// A PSI trigger (the kernel's Documentation/accounting/psi.rst): a pressure file opened for writing with a
/// threshold written to it. ``Poll/wait(_:timeout:)`` then reports ``Poll/Events/priority`` on its descriptor in each
/// window the stall passes the threshold, and ``Poll/Events/error`` once the file is gone (its cgroup removed).
/// Close-on-exec; closed at ``close()`` or with the last reference, whichever comes first.
public final class PressureTrigger: Sendable {
    private let owned: OwnedDescriptor

    /// The trigger, for poll; -1 once closed.
    public var descriptor: CInt { self.owned.descriptor }

    /// Opens `path` and writes `threshold` to it, its NUL included, as the kernel's documentation does.
    /// - Parameters:
    ///   - path: the pressure file (`/proc/pressure/memory`, or a cgroup's `memory.pressure`).
    ///   - threshold: the trigger's line, `some 150000 1000000`: the kind of stall, then the stall and the window in
    ///     microseconds.
    /// - Throws: ``SystemdError`` from `open` (`EACCES`, `ENOENT`) or `write` (`EINVAL`: a window the kernel refuses;
    ///   without `CAP_SYS_RESOURCE` it must be a multiple of 2 s). The file is closed again before it is thrown.
    public init(path: String, threshold: String) throws(SystemdError) {
        let descriptor = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw SystemdError(operation: "open(\(path))", errno: errno) }
        let owned = OwnedDescriptor(descriptor)
        let written = threshold.withCString { write(descriptor, $0, strlen($0) + 1) }
        guard written >= 0 else {
            let code = errno  // before the descriptor is closed, which may set errno
            throw SystemdError(operation: "write(\(path))", errno: code)
        }
        self.owned = owned
    }

    /// Closes the trigger now, rather than with the last reference; later calls do nothing.
    public func close() {
        self.owned.close()
    }
}
