import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// An eventfd one thread waits on (with poll, beside other descriptors) and any other thread sets. Non-blocking and
/// close-on-exec; closed at ``close()`` or with the last reference, whichever comes first.
public final class Wakeup: Sendable {
    private let owned: OwnedDescriptor

    /// The eventfd, for poll; -1 once closed.
    public var descriptor: Int32 { self.owned.descriptor }

    /// - Throws: ``SystemdError`` from `eventfd` (the process's descriptors used up, say).
    public init() throws(SystemdError) {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard descriptor >= 0 else { throw SystemdError(operation: "eventfd", errno: errno) }
        self.owned = OwnedDescriptor(descriptor)
    }

    /// Makes the descriptor readable until ``clear()``.
    public func set() {
        var one: UInt64 = 1
        // Fails only when the counter would overflow, and then the descriptor is readable already.
        _ = write(self.descriptor, &one, 8)
    }

    /// Makes the descriptor unreadable again; does nothing when it was not set.
    public func clear() {
        var value: UInt64 = 0
        // EAGAIN when it was not set: nothing to clear.
        _ = read(self.descriptor, &value, 8)
    }

    /// Waits until the descriptor is set, or `timeout` passes, then makes it unreadable again: for a thread that
    /// waits on nothing else. A wait a signal interrupts, or that cannot be made, ends early, as a wakeup would.
    /// - Parameter timeout: rounded up to whole milliseconds (``Poll/wait(_:timeout:)``).
    public func wait(for timeout: Duration) {
        // Ending early is what a wakeup does anyway: the waiter checks why it woke, and waits again.
        _ = try? Poll.wait([(self.descriptor, .readable)], timeout: timeout)
        self.clear()
    }

    /// Closes the eventfd now, rather than with the last reference. Later calls do nothing, and ``set()`` and
    /// ``clear()`` then do nothing either.
    public func close() {
        self.owned.close()
    }
}
