import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One descriptor kept open (on /dev/null) for the moment the process has no other: let go, it makes room to accept
/// one waiting connection and tell it that it is refused, rather than leave it hanging in the backlog.
final class VarlinkSpareDescriptor: Sendable {
    private enum State {
        /// The spare is open.
        case held(CInt)
        /// The spare was closed for the next accepted connection, which is to be refused.
        case released
        /// A connection took the spare's place; it is opened again once that connection has closed.
        case spent
        /// It could not be opened; tried again whenever a connection closes.
        case missing
    }

    private let state: NIOLockedValueBox<State>

    init() {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        self.state = NIOLockedValueBox(descriptor >= 0 ? .held(descriptor) : .missing)
    }

    deinit {
        if case .held(let descriptor) = self.state.withLockedValue({ $0 }) { close(descriptor) }
    }

    /// Descriptors ran out: closes the spare. Whether there was one to close.
    func release() -> Bool {
        self.state.withLockedValue { state in
            guard case .held(let descriptor) = state else { return false }
            close(descriptor)
            state = .released
            return true
        }
    }

    /// A connection was accepted: whether it has the spare's place (and is to be refused).
    func tookSpare() -> Bool {
        self.state.withLockedValue { state in
            guard case .released = state else { return false }
            state = .spent
            return true
        }
    }

    /// A connection closed: the spare is opened again if it is not open.
    func refill() {
        self.state.withLockedValue { state in
            switch state {
            case .held, .released: return
            case .spent, .missing:
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                state = descriptor >= 0 ? .held(descriptor) : .missing
            }
        }
    }
}
