import CoalesceCore

#if canImport(Glibc)
import Glibc
#endif

/// A watch's message pattern, ready to test messages: a substring, or a POSIX extended regular expression compiled
/// once (glibc's matcher, which needs no backtracking for the expressions it takes: no back-references in ERE).
final class MessageMatcher: @unchecked Sendable {
    /// The most bytes of a message a pattern is tested against: a pattern's cost is bounded by it.
    static let maximumMessageBytes = 16 << 10

    private let pattern: MessagePattern
    /// The text a contains pattern looks for.
    private let needle: [UInt8]
    private var compiled = regex_t()
    private let isRegex: Bool

    /// - Throws: ``WatchProblem/Reason`` with the compiler's own words for a regular expression it refuses.
    init(_ pattern: MessagePattern) throws(WatchProblem.Reason) {
        self.pattern = pattern
        self.needle = Array(pattern.text.utf8)
        guard case .regex(let text) = pattern else {
            self.isRegex = false
            return
        }
        // Bounded before glibc is asked: what it builds grows with the repetitions' product, not the length.
        if let problem = PatternCost.problem(with: text) { throw .init(problem) }
        let result = regcomp(&self.compiled, text, REG_EXTENDED | REG_NOSUB)
        guard result == 0 else {
            var message = [CChar](repeating: 0, count: 256)
            regerror(result, &self.compiled, &message, message.count)
            let words = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .init("the regular expression /\(text)/ cannot be used: \(words)")
        }
        self.isRegex = true
    }

    /// Whether `needle` occurs in `haystack`: memchr to each place its first byte is, memcmp there.
    private static func find(_ needle: UnsafeBufferPointer<UInt8>, in haystack: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = needle.first, let base = haystack.baseAddress, let needleBase = needle.baseAddress else {
            return needle.isEmpty
        }
        var start = 0
        while haystack.count - start >= needle.count {
            guard let found = memchr(base + start, Int32(first), haystack.count - start - needle.count + 1) else { return false }
            let offset = UnsafeRawPointer(found) - UnsafeRawPointer(base)
            if memcmp(base + offset, needleBase, needle.count) == 0 { return true }
            start = offset + 1
        }
        return false
    }

    deinit {
        if self.isRegex { regfree(&self.compiled) }
    }

    /// Whether `message` (its first ``maximumMessageBytes`` bytes) matches.
    func matches(_ message: String) -> Bool {
        switch self.pattern {
        case .contains:
            var message = message
            return message.withUTF8 { haystack in
                self.needle.withUnsafeBufferPointer { Self.find($0, in: UnsafeBufferPointer(rebasing: haystack.prefix(Self.maximumMessageBytes))) }
            }
        case .regex:
            var bytes = Array(message.utf8.prefix(Self.maximumMessageBytes))
            bytes.append(0)
            return bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { regexec(&self.compiled, $0.baseAddress, 0, nil, 0) == 0 }
            }
        }
    }
}
