#if canImport(Glibc)
import Glibc
#endif

/// Strings one peer's messages repeat, kept so that parsing one again gives back the same `String` instead of
/// building a new one: a producer sends the same method name, target and kind with every call, and each of those
/// longer than fifteen bytes cost an allocation, a UTF-8 pass and a free. Only ASCII strings of 16 to 64 bytes
/// are kept (shorter ones live inside the `String` itself; longer ones rarely repeat), eight of them, the oldest
/// replaced first. For one connection's event loop: not for sharing between threads.
public final class JSONStringCache {
    static let lengths = 16...64
    private static let capacity = 8

    // Fixed buffers rather than arrays: looking a string up reads them without the exclusivity checks that a
    // class's array properties cost on every access, which would eat what the cache saves.
    /// Each kept string's byte count (0: the place is empty), its bytes, and the string.
    private let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: JSONStringCache.capacity)
    private let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: JSONStringCache.capacity * JSONStringCache.lengths.upperBound)
    private let strings = UnsafeMutableBufferPointer<String>.allocate(capacity: JSONStringCache.capacity)
    private var next = 0

    public init() {
        self.counts.initialize(repeating: 0)
        self.strings.initialize(repeating: "")
    }

    deinit {
        self.counts.deallocate()
        self.bytes.deallocate()
        _ = self.strings.deinitialize()
        self.strings.deallocate()
    }

    /// The kept string with these bytes, if any.
    func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard let base = bytes.baseAddress else { return nil }
        for place in 0..<Self.capacity where self.counts[place] == bytes.count {
            if memcmp(self.bytes + place * Self.lengths.upperBound, base, bytes.count) == 0 { return self.strings[place] }
        }
        return nil
    }

    /// Keeps `string`, made from `bytes` (at most `lengths.upperBound` of them), which it did not find.
    func keep(_ string: String, bytes: UnsafeBufferPointer<UInt8>) {
        let place = self.next
        self.next = (place + 1) % Self.capacity
        (self.bytes + place * Self.lengths.upperBound).update(from: bytes.baseAddress!, count: bytes.count)
        self.counts[place] = bytes.count
        self.strings[place] = string
    }
}
