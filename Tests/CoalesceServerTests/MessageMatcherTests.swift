import CoalesceCore
@testable import CoalesceServer
import Testing

/// A watch's regular expression as the reader compiles and tests it: PCRE2's syntax, what it refuses to compile
/// said in its words, and what a message may cost bounded by its limits rather than by reading the pattern.
@Suite struct MessageMatcherTests {
    /// Why `pattern` is refused, or `nil` when it compiles.
    static func refusal(_ pattern: String) -> String? {
        do {
            _ = try MessageMatcher(.regex(pattern))
            return nil
        } catch {
            return error.text
        }
    }

    /// The patterns a hostile user gave to take gigabytes or minutes of glibc's matcher are refused at once, or
    /// compile small.
    @Test(arguments: [
        ("((a{1,100}){1,100}){1,100}", "regular expression is too large"),
        ("(|){,2}{2,}{8}", "quantifier does not follow a repeatable item"),
        ("a+++", "quantifier does not follow a repeatable item"),
        ("\\C", "using \\C is disabled"),
        ("(", "missing closing parenthesis (at byte 1)"),
    ])
    func aPatternPCRE2RefusesIsRefusedInItsWords(_ pattern: String, _ words: String) {
        let refusal = Self.refusal(pattern)
        #expect(refusal?.hasPrefix("the regular expression /\(pattern)/ cannot be used: ") == true, "\(refusal ?? "compiled")")
        #expect(refusal?.contains(words) == true, "\(refusal ?? "compiled")")
    }

    /// A message that would take more than the limits to test is untested, with PCRE2's reason, not matched.
    @Test func aMessageThatWouldTakeMoreThanTheLimitsIsUntested() throws {
        let exponential = try MessageMatcher(.regex("^(a?){30}a{30}$"))
        #expect(exponential.test(String(repeating: "a", count: 30)) == .untested("match limit exceeded"))
        #expect(exponential.test(String(repeating: "a", count: 30)) != .matches)
        #expect(exponential.test("b") == .doesNotMatch, "a message without the a's is answered at once")
        // Back-references are matched, by backtracking bounded as any other.
        let reference = try MessageMatcher(.regex("(a|b)*\\1c"))
        #expect(reference.test("xabbc") == .matches)
        let alternating = String(repeating: "ab", count: 1 << 10)
        // No two equal letters before the c: no match, found or given up on within the limits.
        let verdict = reference.test(alternating + "c")
        #expect(verdict == .doesNotMatch || verdict == .untested("match limit exceeded"), "\(verdict)")
        #expect(try MessageMatcher(.regex("(a+)+$")).test(String(repeating: "a", count: 4096) + "b") == .untested("match limit exceeded"))
    }

    /// What took glibc seconds and hundreds of megabytes on one 16 KiB message is answered within the limits.
    @Test func theReportedMatchTimePatternIsAnsweredWithinTheLimits() throws {
        var generator = SystemRandomNumberGenerator()
        let message = String((0..<MessageMatcher.maximumMessageBytes).map { _ in Bool.random(using: &generator) ? "a" : "b" })
        let matcher = try MessageMatcher(.regex("^[ab]*a[ab]{20}c"))
        #expect(matcher.test(message) == .doesNotMatch)
        let verdict = matcher.test(String(message.dropLast(22)) + "a" + String(repeating: "b", count: 20) + "c")
        #expect(verdict == .matches || verdict == .untested("match limit exceeded"), "\(verdict)")
    }

    /// What log patterns are written with: groups, classes, case folding by (?i), Unicode.
    @Test(arguments: [
        ("fail(ed|ure) [0-9]+", "the job failed 12 times", true),
        ("fail(ed|ure) [0-9]+", "fail x", false),
        ("[[:digit:]]{3} ", "HTTP 503 from upstream", true),
        ("\\d+ms$", "took 250ms", true),
        ("ERROR", "error: disk", false),
        ("(?i)ERROR", "error: disk", true),
        ("^é.$", "éx", true),
        ("upstream (timed out|refused)", "upstream refused", true),
        ("\\bOOM\\b", "ROOM", false),
    ])
    func aLogPatternMatchesAsJournalctlGrepWould(_ pattern: String, _ message: String, _ matches: Bool) throws {
        #expect((try MessageMatcher(.regex(pattern)).test(message) == .matches) == matches)
    }

    /// Only the first ``MessageMatcher/maximumMessageBytes`` bytes are tested, cut inside a character or not.
    @Test func onlyTheMessagesFirstBytesAreTested() throws {
        let matcher = try MessageMatcher(.regex("needle"))
        let far = String(repeating: "x", count: MessageMatcher.maximumMessageBytes)
        #expect(matcher.test(far + "needle") != .matches)
        #expect(matcher.test(String(far.dropLast(6)) + "needle") == .matches)
        let cut = String(repeating: "x", count: MessageMatcher.maximumMessageBytes - 1) + "é needle"
        #expect(try MessageMatcher(.regex("x$")).test(cut) == .doesNotMatch, "half a character is no x")
        #expect(try MessageMatcher(.regex("x")).test("") == .doesNotMatch)
    }
}
