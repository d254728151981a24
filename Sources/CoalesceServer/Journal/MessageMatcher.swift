import CPCRE2
import CoalesceCore

#if canImport(Glibc)
// memchr and memcmp: the C library's byte search on the journal's hot path, no system call.
import Glibc
#endif

/// A watch's message pattern, ready to test messages: a substring, or a regular expression in PCRE2's syntax (the
/// one `journalctl --grep` takes), compiled once.
///
/// What a regular expression may cost is bounded by PCRE2's own limits, not by reading the pattern: compiling stops
/// at PCRE2's largest compiled pattern (64 K code units), and each message is tested under ``matchLimit`` steps and
/// ``heapLimitKiB`` of backtracking memory. A message that would take more is ``Verdict/untested``: not taken, and
/// counted.
final class MessageMatcher: @unchecked Sendable {
    /// The most bytes of a message a pattern is tested against.
    static let maximumMessageBytes = 16 << 10
    /// The most steps (PCRE2's match limit: backtracking points tried) one message may take.
    static let matchLimit: UInt32 = 1_000_000
    /// The most memory, in KiB, one message's backtracking may hold.
    static let heapLimitKiB: UInt32 = 8 << 10

    /// What testing one message found.
    enum Verdict: Equatable {
        case matches
        case doesNotMatch
        /// The message could not be tested: PCRE2's words for why (a limit it would pass, most often).
        case untested(String)
    }

    private let pattern: MessagePattern
    /// The text a contains pattern looks for.
    private let needle: [UInt8]
    private let compiled: OpaquePointer?
    private let matchContext: OpaquePointer?
    /// Reused for every message: a matcher is used by one thread at a time (the journal reader's).
    private let matchData: OpaquePointer?

    /// - Throws: ``WatchProblem/Reason`` with PCRE2's own words and the offset for a regular expression it refuses.
    init(_ pattern: MessagePattern) throws(WatchProblem.Reason) {
        self.pattern = pattern
        self.needle = Array(pattern.text.utf8)
        guard case .regex(let text) = pattern else {
            (self.compiled, self.matchContext, self.matchData) = (nil, nil, nil)
            return
        }
        // UTF-8 as journal messages are, with bytes that are not UTF-8 matched as nothing rather than refused; \C
        // (one byte of a character) refused, as it can leave a match inside a character.
        let options = UInt32(PCRE2_UTF) | UInt32(PCRE2_MATCH_INVALID_UTF) | UInt32(PCRE2_NEVER_BACKSLASH_C)
        var code: Int32 = 0
        var offset = 0
        let bytes = Array(text.utf8)
        let compiled = bytes.withUnsafeBufferPointer { pcre2_compile_8($0.baseAddress, $0.count, options, &code, &offset, nil) }
        guard let compiled else {
            throw .init("the regular expression /\(text)/ cannot be used: \(Self.words(code)) (at byte \(offset))")
        }
        guard let context = pcre2_match_context_create_8(nil), let data = pcre2_match_data_create_8(1, nil) else {
            pcre2_code_free_8(compiled)
            throw .init("the regular expression /\(text)/ cannot be used: no memory to match it")
        }
        // A pattern's own (*LIMIT_MATCH=) or (*LIMIT_HEAP=) can only lower these.
        pcre2_set_match_limit_8(context, Self.matchLimit)
        pcre2_set_heap_limit_8(context, Self.heapLimitKiB)
        (self.compiled, self.matchContext, self.matchData) = (compiled, context, data)
    }

    deinit {
        pcre2_match_data_free_8(self.matchData)
        pcre2_match_context_free_8(self.matchContext)
        pcre2_code_free_8(self.compiled)
    }

    /// PCRE2's message for an error code.
    private static func words(_ code: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = pcre2_get_error_message_8(code, &buffer, buffer.count)
        return count > 0 ? String(decoding: buffer.prefix(Int(count)), as: UTF8.self) : "error \(code)"
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

    /// Tests `message` (its first ``maximumMessageBytes`` bytes).
    func test(_ message: String) -> Verdict {
        var message = message
        return message.withUTF8 { whole in
            let haystack = UnsafeBufferPointer(rebasing: whole.prefix(Self.maximumMessageBytes))
            guard let compiled = self.compiled else {
                return self.needle.withUnsafeBufferPointer { Self.find($0, in: haystack) } ? .matches : .doesNotMatch
            }
            // An empty message has no base address; PCRE2 takes any non-null pointer with length 0.
            let result = (haystack.baseAddress ?? UnsafePointer(bitPattern: 1)!).withMemoryRebound(to: UInt8.self, capacity: haystack.count) {
                pcre2_match_8(compiled, $0, haystack.count, 0, 0, self.matchData, self.matchContext)
            }
            if result >= 0 { return .matches }
            if result == PCRE2_ERROR_NOMATCH { return .doesNotMatch }
            return .untested(Self.words(result))
        }
    }
}
