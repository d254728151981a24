#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own for work that waits in `poll` (the alert timer, the pressure monitor), so that a blocking
/// wait never holds one of the cooperative pool's few threads or an event loop.
public struct DedicatedThread: Sendable {
    private let handle: pthread_t

    /// Starts a thread that runs `body` and ends when it returns.
    /// - Throws: ``SystemdError`` from `pthread_create` (`EAGAIN`: the process's or the user's threads are used
    ///   up); `body` is released unrun.
    public init(_ body: @escaping @Sendable () -> Void) throws(SystemdError) {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var handle = pthread_t()
        let started = pthread_create(
            &handle,
            nil,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            },
            context
        )
        guard started == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SystemdError(operation: "pthread_create", errno: started)
        }
        self.handle = handle
    }

    /// Whether the calling thread is this one.
    public var isCurrent: Bool { pthread_equal(self.handle, pthread_self()) != 0 }

    /// Waits for the thread to end. Call it once, and not from the thread itself (``isCurrent``).
    public func join() {
        pthread_join(self.handle, nil)
    }

    /// Lets the thread end on its own, its resources freed as it does: for a thread that is told to stop from
    /// within (it cannot wait for itself). Call it once, instead of ``join()``.
    public func detach() {
        pthread_detach(self.handle)
    }

    /// The closure, boxed to cross pthread_create's single pointer.
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
