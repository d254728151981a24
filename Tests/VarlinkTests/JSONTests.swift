import Testing
import Varlink

@Suite struct JSONTests {
    @Test func parsesEveryKindOfValue() throws {
        let value = try JSONParser.parse(#" {"a": [1, -2.5, 3e2, true, false, null], "b": "x\ty", "c": {}} "#)
        #expect(
            value == [
                "a": [.int(1), .double(-2.5), .double(300), true, false, nil],
                "b": "x\ty",
                "c": .object([:]),
            ]
        )
    }

    @Test func keepsIntegersExactAndTellsThemFromFractions() throws {
        #expect(try JSONParser.parse("9007199254740993") == .int(9_007_199_254_740_993))
        #expect(try JSONParser.parse("-0") == .int(0))
        #expect(try JSONParser.parse("1.0") == .double(1))
        #expect(try JSONParser.parse("99999999999999999999") == .double(1e20))
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        #expect(try JSONParser.parse(#""\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t""#) == .string("é😀\"\\/\u{08}\u{0C}\n\r\t"))
        #expect(try JSONParser.parse("\"héllo ✓\"") == .string("héllo ✓"))
    }

    @Test(arguments: [
        ("", 0, "unexpected end of input"),
        ("{\"a\" 1}", 5, "expected ':' after member name"),
        ("[1,]", 3, "unexpected character ']'"),
        ("tru", 0, "expected 'true'"),
        ("\"abc", 4, "unterminated string"),
        ("\"a\u{01}\"", 2, "control character in string"),
        ("\"\\ud800\"", 7, "unpaired high surrogate"),
        ("01", 1, "unexpected data after the JSON value"),
        ("{} x", 3, "unexpected data after the JSON value"),
        ("1e999", 0, "number out of range"),
        ("{1:2}", 1, "expected a member name in quotes"),
    ])
    func namesTheByteWhereTheTextWentWrong(input: String, offset: Int, reason: String) {
        #expect(throws: JSONParseError(offset: offset, reason: reason)) { try JSONParser.parse(input) }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func boundsNestingInsteadOfOverflowingTheStack() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError(offset: JSONParser.maximumDepth, reason: "nesting deeper than 128 levels")) {
            try JSONParser.parse(deep)
        }
        let allowed = String(repeating: "[", count: 128) + String(repeating: "]", count: 128)
        #expect(try JSONParser.parse(allowed).arrayValue != nil)
    }

    @Test func serializesCompactlyWithSortedKeysAndEscapes() {
        let value: JSONValue = ["b": [1, 2.5, nil], "a": "q\"\\\n\u{01}é", "c": .double(.nan)]
        #expect(value.jsonText == #"{"a":"q\"\\\n\u0001é","b":[1,2.5,null],"c":null}"#)
    }

    @Test func roundTripsThroughTextUnchanged() throws {
        let value: JSONValue = ["method": "io.coalesced.System.Stats", "parameters": ["n": -42, "list": ["x", true]]]
        #expect(try JSONParser.parse(value.jsonText) == value)
        #expect(try JSONParser.parse(value.prettyText()) == value)
    }
}
