#if canImport(Glibc)
import Glibc
#endif

/// An inotify instance (inotify(7)), for a thread that waits in poll beside other descriptors. Non-blocking and
/// close-on-exec; closed at ``close()`` or with the last reference, whichever comes first.
///
/// - Important: Each instance takes one of the user's, of which there are few (`fs.inotify.max_user_instances`).
public final class Inotify: Sendable {
    /// What a watch reports, and what an event says happened.
    public struct Events: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32

        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// A file was created in the watched directory (`IN_CREATE`).
        public static let created = Events(rawValue: UInt32(IN_CREATE))
        /// A file was renamed into the watched directory (`IN_MOVED_TO`).
        public static let movedTo = Events(rawValue: UInt32(IN_MOVED_TO))
        /// A file was renamed out of the watched directory (`IN_MOVED_FROM`).
        public static let movedFrom = Events(rawValue: UInt32(IN_MOVED_FROM))
        /// A file was removed from the watched directory (`IN_DELETE`).
        public static let deleted = Events(rawValue: UInt32(IN_DELETE))
        /// A file opened for writing was closed (`IN_CLOSE_WRITE`).
        public static let closedAfterWriting = Events(rawValue: UInt32(IN_CLOSE_WRITE))
        /// A file's metadata changed (`IN_ATTRIB`).
        public static let attributesChanged = Events(rawValue: UInt32(IN_ATTRIB))
        /// In a watch: the path must be a directory (`IN_ONLYDIR`).
        public static let onlyDirectory = Events(rawValue: UInt32(IN_ONLYDIR))
        /// In an event: the kernel's queue overflowed and events were lost (`IN_Q_OVERFLOW`).
        public static let queueOverflowed = Events(rawValue: UInt32(IN_Q_OVERFLOW))
    }

    /// One event read.
    public struct Event: Sendable, Hashable {
        /// What happened.
        public var events: Events
        /// The name of the file it happened to, within the watched directory: its bytes, as file names need not be
        /// UTF-8; empty for an event on the watched path itself.
        public var name: [UInt8]
    }

    private let owned: OwnedDescriptor

    /// The inotify instance, for poll; -1 once closed.
    public var descriptor: CInt { self.owned.descriptor }

    /// Creates an instance, watching nothing yet.
    /// - Throws: ``SystemdError`` from `inotify_init1` (`EMFILE`: the user's instances used up).
    public init() throws(SystemdError) {
        let descriptor = inotify_init1(CInt(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { throw SystemdError(operation: "inotify_init1", errno: errno) }
        self.owned = OwnedDescriptor(descriptor)
    }

    /// Watches `path` for `events`.
    /// - Throws: ``SystemdError`` from `inotify_add_watch` (`ENOENT`: no such path; `ENOSPC`: the user's watches used
    ///   up).
    public func watch(_ path: String, for events: Events) throws(SystemdError) {
        guard inotify_add_watch(self.descriptor, path, events.rawValue) >= 0 else {
            throw SystemdError(operation: "inotify_add_watch(\(path))", errno: errno)
        }
    }

    /// Reads every event queued, in order; empty when none is (or once closed).
    public func readEvents() -> [Event] {
        // Room for many events at once: each is 16 bytes and its name, padded.
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var events: [Event] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { read(self.descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return events }
            var offset = 0
            while offset + 16 <= count {
                let mask = Self.uint32(buffer, offset + 4)
                let length = Int(Self.uint32(buffer, offset + 12))
                let name = buffer[(offset + 16)..<min(offset + 16 + length, count)].prefix { $0 != 0 }
                events.append(Event(events: Events(rawValue: mask), name: Array(name)))
                offset += 16 + length
            }
        }
    }

    /// Closes the instance now, rather than with the last reference; later calls do nothing.
    public func close() {
        self.owned.close()
    }

    /// A field of struct inotify_event, which the kernel writes in host order.
    private static func uint32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }
}
