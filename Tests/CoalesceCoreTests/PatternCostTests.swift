import CoalesceCore
import Testing

/// A watch's regular expression is bounded by what it expands to in glibc's compiler, not by its length: nested
/// and stacked repetitions multiply, optional copies count with their square, and what only looks like a
/// repetition (in brackets, escaped, a `{` that is no bound) counts as the one character it is.
@Suite struct PatternCostTests {
    @Test(arguments: [
        "((a{1,100}){1,100}){1,100}",  // a million copies: 2.4 GB in glibc
        "((a{1,30}){1,30}){1,30}",
        "a++++++++++++++++++++",  // each + doubles: 717 MB
        "a{0,2000}",  // nested optionals: 32 MB
        ".{0,1000}x",
        "(a|b|c|d|e|f){1,500}",
        "(x{1,100}|y){1,100}",
    ])
    func costlyPatternsAreRefusedSayingWhy(pattern: String) {
        #expect(PatternCost.size(of: pattern) > PatternCost.budget)
        let problem = PatternCost.problem(with: pattern)
        #expect(problem?.hasPrefix("the regular expression expands to") == true)
        #expect(problem?.contains("at most \(PatternCost.budget)") == true)
    }

    @Test(arguments: [
        "fail(ed|ure)", "^[0-9]{1,3}(\\.[0-9]{1,3}){3}$", "a{1,255}", ".{2000}x", "(ab|cd){100}", "(.*a){1,60}",
        "Failed password for .* from [0-9]{1,3}(\\.[0-9]{1,3}){3}", "a{0,500}", "^(GET|POST|PUT) /[^ ]* HTTP/1\\.[01]$",
    ])
    func ordinaryPatternsPass(pattern: String) {
        #expect(PatternCost.problem(with: pattern) == nil, "\(PatternCost.size(of: pattern)) nodes")
    }

    @Test func whatOnlyLooksLikeARepetitionCountsAsOneCharacter() {
        // Braces in brackets, escaped, or not forming a bound are ordinary characters.
        #expect(PatternCost.size(of: "[{}]{1,10}") < 40)
        #expect(PatternCost.size(of: "a\\{1000000\\}") <= 20, "ten characters")
        #expect(PatternCost.size(of: "a{x}{y,}") < 20)
        #expect(PatternCost.size(of: "[]{1000}]") < 20, "a ']' first in brackets is a member")
        #expect(PatternCost.size(of: "[[:digit:]{}]{2}") < 20, "a class holds its own ']'")
        #expect(PatternCost.size(of: "a)b{3}") < 20, "a ')' without its '(' is a character")
    }

    @Test func repetitionsMultiplyAndStackedOnesCompound() {
        let single = PatternCost.size(of: "(ab){10}")
        #expect(PatternCost.size(of: "((ab){10}){10}") > 9 * single)
        #expect(PatternCost.size(of: "a+++") >= 2 * PatternCost.size(of: "a++"))
        // Saturates rather than overflowing.
        #expect(PatternCost.size(of: String(repeating: "(", count: 9) + "a" + String(repeating: "){32767}", count: 9)) > PatternCost.budget)
        #expect(PatternCost.size(of: "a" + String(repeating: "+", count: 200)) > PatternCost.budget)
    }
}
