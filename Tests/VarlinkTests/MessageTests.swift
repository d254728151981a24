import Testing
import Varlink

@Suite struct MessageTests {
    @Test func readsACallWithEveryFlag() throws {
        let call = try VarlinkCall(
            json: Array(#"{"method":"io.coalesced.System.Stats","parameters":{"a":1},"more":true,"oneway":false}"#.utf8)
        )
        #expect(call.method == "io.coalesced.System.Stats")
        #expect(call.interface == "io.coalesced.System")
        #expect(call.methodName == "Stats")
        #expect(call.parameters == ["a": 1])
        #expect(call.more && !call.oneway && !call.upgrade)
    }

    /// The envelope's names are compared where they lie; one written with escapes is the same name.
    @Test func readsEnvelopeNamesWrittenWithEscapes() throws {
        let call = try VarlinkCall(
            json: Array(#"{"\u006dethod":"a.b.C","param\u0065ters":{"k\u00e9y":1},"more":true,"other":[{"x":"\u00e9"}]}"#.utf8)
        )
        #expect(call.method == "a.b.C")
        #expect(call.parameters == ["kéy": 1])
        #expect(call.more)
    }

    @Test(arguments: [
        (#"[]"#, "a call must be a JSON object"),
        (#"{}"#, "a call needs a string member 'method'"),
        (#"{"method":5}"#, "a call needs a string member 'method'"),
        (#"{"method":"Stats"}"#, "'Stats' is not an interface-qualified method name"),
        (#"{"method":"io.coalesced.System.stats"}"#, "'io.coalesced.System.stats' is not an interface-qualified method name"),
        (#"{"method":"a.b.C","parameters":[1]}"#, "'parameters' must be an object"),
        (#"{"method":"a.b.C","more":"yes"}"#, "'more' must be a boolean"),
    ])
    func refusesMalformedCallsSayingWhy(text: String, reason: String) throws {
        #expect(throws: VarlinkProtocolError.invalidMessage(reason)) { try VarlinkCall(json: Array(text.utf8)) }
    }

    /// A parameter the method keeps as its text reads, compares and is written out as the value it stands for
    /// (written: byte for byte as sent), whether the method comes before the parameters or after them.
    @Test func aParameterKeptAsTextIsTheValueSentAndWrittenAsSent() throws {
        let payload = #"{ "b": [1, 2.5e3, "\u00e9\n"], "a": {"c": null} }"#
        let orders = [
            #"{"method":"a.b.C","parameters":{"kind":"k","payload":"# + payload + "}}",
            #"{"parameters":{"kind":"k","payload":"# + payload + #"},"method":"a.b.C"}"#,
        ]
        for text in orders {
            let call = try VarlinkCall(json: Array(text.utf8)) { method in method == "a.b.C" ? ["payload"] : [] }
            guard case .text(let kept)? = call.parameters["payload"] else {
                Issue.record("payload not kept as text in \(text)")
                continue
            }
            #expect(kept.utf8 == Array(payload.utf8))
            #expect(call.parameters["kind"] == "k")
            #expect(call.parameters["payload"] == ["a": ["c": nil], "b": [1, .double(2500), "é\n"]])
            #expect(call.parameters["payload"]?.isObject == true)
            #expect(call.parameters["payload"]?["b"]?.arrayValue?.count == 3)
            #expect(call.parameters == (try VarlinkCall(json: Array(text.utf8))).parameters)
            var written: [UInt8] = []
            JSONValue.text(kept).write(to: &written)
            #expect(written == Array(payload.utf8))
        }
        let notObject = try VarlinkCall(json: Array(#"{"method":"a.b.C","parameters":{"payload":[1]}}"#.utf8)) { _ in ["payload"] }
        #expect(notObject.parameters["payload"]?.isObject == false)
        #expect(notObject.parameters["payload"] == [1])
    }

    /// What a call kept as text is checked as strictly as a parsed one: the same text is refused with the same
    /// error, at the same byte, whether the parameter is parsed or kept, and wherever the method comes.
    @Test(arguments: [
        "{\"a\" 1}", "[1,]", "tru", "\"abc", "\"a\u{01}\"", "\"\\ud800\"", "\"\\x\"", "1e999", "-", "1.", "{1:2}",
        "{\"a\":1,}", "{\"a\":[1 2]}", "[", "\"\\u12\"", "\"\u{E9}\"", String(repeating: "[", count: 200),
        "123456789012345678901234567890e400", "{\"x\":\"\\ud83d\\u0041\"}",
    ])
    func aParameterKeptAsTextIsRefusedAsParsingRefusesIt(payload: String) {
        for text in [
            #"{"method":"a.b.C","parameters":{"payload":"# + payload + "}}",
            #"{"parameters":{"payload":"# + payload + #"},"method":"a.b.C"}"#,
        ] {
            var bytes = Array(text.utf8)
            // A byte that is not UTF-8, in place of the é.
            if let position = bytes.firstIndex(of: 0xC3) { bytes.replaceSubrange(position...position + 1, with: [0xFF]) }
            let parsed = #expect(throws: VarlinkProtocolError.self) { try VarlinkCall(json: bytes) }
            let kept = #expect(throws: VarlinkProtocolError.self) { try VarlinkCall(json: bytes) { _ in ["payload"] } }
            #expect(parsed != nil && kept == parsed, "\(text)")
        }
    }

    @Test func callAndReplyRoundTrip() throws {
        let call = VarlinkCall(method: "a.b.C", parameters: ["x": "y"], oneway: true)
        #expect(try VarlinkCall(json: Array(call.message.jsonText.utf8)) == call)
        let reply = VarlinkReply(parameters: ["n": 1], continues: true)
        #expect(try VarlinkReply(message: reply.message) == reply)
        #expect(VarlinkReply(error: VarlinkError.methodNotFound("a.b.C")).message.jsonText
            == #"{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"a.b.C"}}"#)
    }

    /// A reply of parameters written out ahead of time goes out as the same frame as one written from its
    /// parameters, with `continues` or an error set on it too.
    @Test func aReplyOfEncodedParametersWritesTheSameFrame() {
        let parameters: JSONObject = ["delivered": true, "recipients": 1]
        let encoded = VarlinkEncodedParameters(parameters)
        func frame(_ reply: VarlinkReply) -> String {
            var bytes: [UInt8] = []
            reply.writeFrame(to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(frame(VarlinkReply(encoded)) == #"{"parameters":{"delivered":true,"recipients":1}}"# + "\0")
        var continued = VarlinkReply(encoded)
        continued.continues = true
        #expect(frame(continued) == frame(VarlinkReply(parameters: parameters, continues: true)))
        #expect(frame(continued) == #"{"continues":true,"parameters":{"delivered":true,"recipients":1}}"# + "\0")
        var failed = VarlinkReply(encoded)
        failed.error = "org.example.Failed"
        #expect(frame(failed) == frame(VarlinkReply(parameters: parameters, error: "org.example.Failed")))
        var changed = VarlinkReply(encoded)
        changed.parameters = ["delivered": false]
        #expect(frame(changed) == #"{"parameters":{"delivered":false}}"# + "\0")
    }

    @Test func interfaceNamesFollowTheSpecification() {
        #expect(VarlinkNames.isValidInterface("org.varlink.service"))
        #expect(VarlinkNames.isValidInterface("io.coalesced.System"))
        #expect(VarlinkNames.isValidInterface("a-b.c1"))
        #expect(VarlinkNames.isValidInterface("org.1example.x"))
        #expect(!VarlinkNames.isValidInterface("org.-example"))
        #expect(!VarlinkNames.isValidInterface("single"))
        #expect(!VarlinkNames.isValidInterface("a..b"))
        #expect(!VarlinkNames.isValidInterface("1a.b"))
        #expect(!VarlinkNames.isValidInterface("a-.b"))
    }

    @Test func interfaceDescriptionListsItsDeclarations() throws {
        let description = try VarlinkInterfaceDescription(
            text: """
                # doc
                interface org.example.test
                type Thing (a: int)
                # a method
                method Do(thing: Thing) -> (ok: bool)
                method Other() -> ()
                error Failed (reason: string)
                """
        )
        #expect(description.name == "org.example.test")
        #expect(description.methods == ["Do", "Other"])
        #expect(description.types == ["Thing"])
        #expect(description.errors == ["Failed"])
    }

    @Test func interfaceDescriptionRefusesDuplicatesAndMissingHeader() {
        #expect(throws: VarlinkInterfaceDescription.ParseError(line: 3, reason: "'A' is declared twice")) {
            try VarlinkInterfaceDescription(text: "interface a.b\nmethod A() -> ()\nerror A ()\n")
        }
        #expect(throws: VarlinkInterfaceDescription.ParseError(line: 1, reason: "no 'interface' line")) {
            try VarlinkInterfaceDescription(text: "# nothing\n")
        }
    }
}
