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
    private var compiled = regex_t()
    private let isRegex: Bool

    /// - Throws: ``WatchProblem/Reason`` with the compiler's own words for a regular expression it refuses.
    init(_ pattern: MessagePattern) throws(WatchProblem.Reason) {
        self.pattern = pattern
        guard case .regex(let text) = pattern else {
            self.isRegex = false
            return
        }
        let result = regcomp(&self.compiled, text, REG_EXTENDED | REG_NOSUB)
        guard result == 0 else {
            var message = [CChar](repeating: 0, count: 256)
            regerror(result, &self.compiled, &message, message.count)
            let words = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .init("the regular expression /\(text)/ cannot be used: \(words)")
        }
        self.isRegex = true
    }

    deinit {
        if self.isRegex { regfree(&self.compiled) }
    }

    /// Whether `message` (its first ``maximumMessageBytes`` bytes) matches.
    func matches(_ message: String) -> Bool {
        var bytes = Array(message.utf8.prefix(Self.maximumMessageBytes))
        switch self.pattern {
        case .contains(let text):
            let needle = Array(text.utf8)
            guard needle.count <= bytes.count else { return false }
            return (0...(bytes.count - needle.count)).contains { start in bytes[start..<(start + needle.count)].elementsEqual(needle) }
        case .regex:
            bytes.append(0)
            return bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { regexec(&self.compiled, $0.baseAddress, 0, nil, 0) == 0 }
            }
        }
    }
}
