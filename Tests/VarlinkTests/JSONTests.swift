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

    /// A value held as its text equals, and hashes as, the value it stands for, whatever the order of its
    /// members or the white space in it.
    @Test func aValueHeldAsTextIsTheValueItStandsFor() throws {
        let text = JSONValue.text(try JSONText(validating: Array(#" {"b": 2, "a": [1, "x"]} "#.utf8)))
        let built: JSONValue = ["a": [1, "x"], "b": 2]
        #expect(text == built && built == text)
        #expect(text.hashValue == built.hashValue)
        #expect(text != ["a": [1, "x"], "b": 3])
        #expect(text.objectValue == built.objectValue)
        #expect(text["b"]?.intValue == 2)
        #expect(text.prettyText() == built.prettyText())
        #expect(throws: JSONParseError.self) { try JSONText(validating: Array("{".utf8)) }
    }

    @Test func roundTripsThroughTextUnchanged() throws {
        let value: JSONValue = ["method": "io.coalesced.System.Stats", "parameters": ["n": -42, "list": ["x", true]]]
        #expect(try JSONParser.parse(value.jsonText) == value)
        #expect(try JSONParser.parse(value.prettyText()) == value)
    }

    /// Strings are scanned sixteen bytes at a time, then eight: whatever ends a run (a quote, an escape, a control
    /// character, a byte that is not ASCII) must be found at every position within either and after them.
    @Test func findsWhatEndsAStringAtEveryPosition() throws {
        for length in 0..<40 {
            let plain = String(repeating: "x", count: length)
            #expect(try JSONParser.parse("\"\(plain)\"") == .string(plain))
            #expect(try JSONParser.parse("\"\(plain)\\n\(plain)\"") == .string(plain + "\n" + plain))
            #expect(try JSONParser.parse("\"\(plain)é\(plain)\"") == .string(plain + "é" + plain))
            var invalid = Array("\"\(plain)x\(plain)\"".utf8)
            invalid[1 + length] = 0xFF
            #expect(throws: JSONParseError.self, "0xFF after \(length) bytes") { try JSONParser.parse(invalid) }
            // Checked without being built: a parameter kept as its text.
            let call = Array(#"{"method":"a.b.C","parameters":{"p":"#.utf8) + invalid + Array("}}".utf8)
            #expect(throws: VarlinkProtocolError.self, "0xFF after \(length) bytes, kept as text") {
                try VarlinkCall(json: call, keepingAsText: { _ in ["p"] })
            }
            #expect(try VarlinkCall(json: Array(#"{"method":"a.b.C","parameters":{"p":"\#(plain)é\#(plain)"}}"#.utf8), keepingAsText: { _ in ["p"] })
                .parameters["p"] == .string(plain + "é" + plain))
            #expect(throws: JSONParseError(offset: 1 + length, reason: "control character in string")) {
                try JSONParser.parse("\"\(plain)\u{1F}\(plain)\"")
            }
            #expect(throws: JSONParseError(offset: 1 + length, reason: "unterminated string")) {
                try JSONParser.parse("\"\(plain)")
            }
            // A quote ends the string where it is, not a word later.
            #expect(throws: JSONParseError(offset: 2 + length, reason: "unexpected data after the JSON value")) {
                try JSONParser.parse("\"\(plain)\"\(plain)x\"")
            }
        }
        var invalid = Array("\"0123456789abcdef\"".utf8)
        invalid[12] = 0xFF
        #expect(throws: JSONParseError.self) { try JSONParser.parse(invalid) }
    }

    @Test func objectsCompareAndHashWhateverTheOrderAndKeepTheLastOfARepeatedName() throws {
        let forward = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#)
        let backward = try JSONParser.parse(#"{"b":2,"a":3}"#)
        #expect(forward == backward)
        #expect(forward.hashValue == backward.hashValue)
        #expect(forward != (try JSONParser.parse(#"{"a":1,"b":2}"#)))
        #expect(forward != (try JSONParser.parse(#"{"a":3}"#)))
        // Kept in the order first written; written out by name.
        #expect(forward.objectValue?.keys == ["a", "b"])
        #expect(try JSONParser.parse(#"{"b":1,"a":2}"#).jsonText == #"{"a":2,"b":1}"#)
    }

    /// A peer may send an object of many members: past a handful they are found through a table, and a repeated
    /// name still keeps its last value.
    @Test func largeObjectsStayCorrect() throws {
        let count = 5_000
        let text = "{" + (0..<count).map { "\"m\($0)\":\($0)" }.joined(separator: ",") + ",\"m7\":\"again\"}"
        guard case .object(var object) = try JSONParser.parse(text) else {
            Issue.record("not an object")
            return
        }
        #expect(object.count == count)
        #expect(object["m4999"] == .int(4999))
        #expect(object["m7"] == "again")
        object["m0"] = nil
        #expect(object.count == count - 1 && object["m0"] == nil && object["m1"] == .int(1))
        object["new"] = true
        #expect(object["new"] == true && object.count == count)
        let merged = object.merging(["m1": "x", "other": nil]) { _, later in later }
        #expect(merged["m1"] == "x" && merged["other"] == .null && merged.count == count + 1)
    }

    /// Strings a peer repeats come back from its cache: always the string that was sent, whether kept, found,
    /// replaced by others (more than the cache holds), or of the same length as a kept one.
    @Test func stringsKeptBetweenMessagesAreAlwaysTheOnesSent() throws {
        let strings = JSONStringCache()
        let names = (0..<20).map { "org.example.app\($0 < 10 ? "0" : "")\($0)x" }  // 18 bytes each: kept
        for round in 0..<3 {
            for name in names + ["org.example.café-app", String(repeating: "y", count: 65), "short"] {
                var seen: [String] = []
                let text = #"{"method":"io.example.Service.Method","target":"\#(name)"}"#
                _ = try JSONParser.parseMembers(Array(text.utf8), strings: strings) { key, value in
                    if key == "target", let value = value.stringValue { seen.append(value) }
                }
                #expect(seen == [name], "round \(round)")
            }
        }
    }
}
