#if canImport(Glibc)
import Glibc
#endif

/// Deferred calls answered together from another thread (a store's writer answering a whole commit's posts)
/// wake each connection once, after the last of them, instead of once for the first and again for those that came
/// while the event loop was taking it: one hop, and one write of all their replies.
public enum VarlinkAnswerGathering {
    /// The connections answered on this thread inside ``gather(_:)``, to be woken when it returns.
    final class Gathered {
        var connections: [VarlinkAnsweredReplies] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// What this thread is gathering, if it is.
    static var current: Gathered? {
        guard let pointer = pthread_getspecific(Self.key) else { return nil }
        return Unmanaged<Gathered>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `body`; the connections it answers calls of are woken once it returns. Nested calls gather into the
    /// outermost.
    public static func gather<T>(_ body: () throws -> T) rethrows -> T {
        guard Self.current == nil else { return try body() }
        let gathered = Gathered()
        pthread_setspecific(Self.key, Unmanaged.passUnretained(gathered).toOpaque())
        defer {
            pthread_setspecific(Self.key, nil)
            for connection in gathered.connections { connection.wake() }
        }
        return try body()
    }
}
