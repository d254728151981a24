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

    @Test func callAndReplyRoundTrip() throws {
        let call = VarlinkCall(method: "a.b.C", parameters: ["x": "y"], oneway: true)
        #expect(try VarlinkCall(json: Array(call.message.jsonText.utf8)) == call)
        let reply = VarlinkReply(parameters: ["n": 1], continues: true)
        #expect(try VarlinkReply(message: reply.message) == reply)
        #expect(VarlinkReply(error: VarlinkError.methodNotFound("a.b.C")).message.jsonText
            == #"{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"a.b.C"}}"#)
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
