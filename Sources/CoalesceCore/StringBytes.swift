extension String {
    /// Whether the string's UTF-8 begins with `prefix`'s bytes. `hasPrefix` compares grapheme by grapheme, and
    /// `utf8.starts(with:)` goes through iterators: each costs a post a hundred instructions or more (counted).
    package func startsWithBytes(of prefix: StaticString) -> Bool {
        let head = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        return self.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.count >= head.count && UnsafeBufferPointer(rebasing: bytes[..<head.count]).elementsEqual(head)
        } ?? self.utf8.starts(with: head)
    }
}
