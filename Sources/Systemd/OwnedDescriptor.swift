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

/// A descriptor handed over as a plain number (a bus reply's `h`, such as logind's inhibitor lock), whose holder
/// decides when it ends.
public enum HandedDescriptor {
    /// Closes it: for logind's inhibitor, that lets go of the lock.
    public static func close(_ descriptor: CInt) {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
    }
}
