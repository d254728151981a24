// Only in the ThreadSanitizer build (scripts/tsan passes -DCOALESCED_TSAN): this module's `Mutex` is then this one,
// on a pthread mutex, instead of the standard library's. That one hands a contended lock over in the kernel
// (FUTEX_LOCK_PI, FUTEX_UNLOCK_PI), where ThreadSanitizer does not see it, and every access under the lock by a
// thread that had to wait for it is reported as a race. The same file is linked into each module that uses `Mutex`.
#if COALESCED_TSAN
import Glibc

/// The standard library's `Mutex` API over a `pthread_mutex_t`, whose lock and unlock ThreadSanitizer intercepts.
final class Mutex<Value>: @unchecked Sendable {
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init(_ value: Value) {
        self.value = value
        self.mutex = .allocate(capacity: 1)
        pthread_mutex_init(self.mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(self.mutex)
        self.mutex.deallocate()
    }

    func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        return try body(&self.value)
    }
}
#endif
