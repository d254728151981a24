import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A descriptor one wrapper owns: closed once, by ``close()`` or when the wrapper goes, whichever comes first.
/// After ``close()`` it reads -1, so that a late call fails with `EBADF` rather than reaching a descriptor the
/// kernel has since handed to someone else.
struct OwnedDescriptor: ~Copyable, Sendable {
    private let value: Atomic<CInt>

    init(_ descriptor: CInt) {
        self.value = Atomic(descriptor)
    }

    deinit {
        self.close()
    }

    /// The descriptor; -1 once closed.
    var descriptor: CInt { self.value.load(ordering: .acquiring) }

    /// Closes it now; later calls do nothing.
    func close() {
        let descriptor = self.value.exchange(-1, ordering: .acquiringAndReleasing)
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }
}
