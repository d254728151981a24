import Testing
import Varlink

/// The interface language read in full, and values checked against its types as the specification maps them to
/// JSON.
@Suite struct TypeCheckTests {
    static let description = try! VarlinkInterfaceDescription(
        text: """
            # A test interface.
            interface org.example.types

            # A policy.
            type Policy (
              policy: string,  # its name
              bound: ?int,
              volatile: ?bool
            )

            type Color (red, green, blue)

            # A tree: types may refer to themselves.
            type Node (value: int, children: ?[]Node)

            method Do(
              name: string,
              payload: object,
              policy: ?Policy,
              kinds: ?[string]Policy,
              uids: ?[]int,
              ratio: ?float,
              color: ?Color,
              tree: ?Node,
              anything: ?any,
              inline: ?(x: int, y: ?(z: bool))
            ) -> (ok: bool)
            method Nothing() -> ()
            error Failed (reason: string)
            """
    )

    @Test func readsEveryDeclarationWithItsTypes() throws {
        let description = Self.description
        #expect(description.name == "org.example.types")
        #expect(description.methods == ["Do", "Nothing"])
        #expect(description.types == ["Policy", "Color", "Node"])
        #expect(description.errors == ["Failed"])
        #expect(description.parameters["Nothing"] == [])
        #expect(
            description.definitions["Policy"]
                == .structure([
                    VarlinkField("policy", .string), VarlinkField("bound", .optional(.int)),
                    VarlinkField("volatile", .optional(.bool)),
                ])
        )
        #expect(description.definitions["Color"] == .enumeration(["red", "green", "blue"]))
        let parameters = try #require(description.parameters["Do"])
        #expect(parameters.map(\.name) == ["name", "payload", "policy", "kinds", "uids", "ratio", "color", "tree", "anything", "inline"])
        #expect(parameters[3].type == .optional(.dictionary(.named("Policy"))))
        #expect(parameters[9].type == .optional(.structure([VarlinkField("x", .int), VarlinkField("y", .optional(.structure([VarlinkField("z", .bool)])))])))
    }

    static let good: JSONObject = ["name": "a", "payload": [:]]

    /// Parameters added to a good call, and the mismatch they make (none where no path is given).
    struct Row: Sendable, CustomTestStringConvertible {
        var added: JSONObject
        var mismatch: VarlinkTypeMismatch?

        init(_ added: JSONObject, _ path: String? = nil, _ reason: String = "") {
            self.added = added
            self.mismatch = path.map { VarlinkTypeMismatch(path: $0, reason: reason) }
        }

        var testDescription: String { self.added.description }
    }

    @Test(arguments: [
        Row([:]),
        Row(["policy": ["policy": "latest", "bound": 3, "volatile": true]]),
        Row(["policy": nil, "kinds": nil, "uids": nil]),
        Row(["unknown": 1, "policy": ["policy": "latest", "extra": [1]]]),
        Row(["kinds": ["mail": ["policy": "count"]], "uids": [1, 2], "ratio": 1, "color": "green"]),
        Row(["ratio": 0.5, "anything": [1, "two"], "tree": ["value": 1, "children": [["value": 2]]]]),
        Row(["inline": ["x": 1, "y": ["z": false]]]),
        Row(["name": 1], "name", "expected a string, got an int"),
        Row(["name": nil], "name", "expected a string, got null"),
        Row(["payload": "text"], "payload", "expected an object, got a string"),
        Row(["payload": [1]], "payload", "expected an object, got an array"),
        Row(["policy": "latest"], "policy", "expected a Policy, got a string"),
        Row(["policy": ["bound": 1]], "policy.policy", "missing; expected a string"),
        Row(["policy": ["policy": "queue", "bound": 1.5]], "policy.bound", "expected an int, got a float (1.5)"),
        Row(["policy": ["policy": "queue", "bound": 2.0]], "policy.bound", "expected an int, got a float (2.0)"),
        Row(["policy": ["policy": "count", "volatile": "yes"]], "policy.volatile", "expected a bool, got a string"),
        Row(["kinds": ["mail": ["policy": true]]], "kinds.mail.policy", "expected a string, got a bool"),
        Row(["kinds": ["mail.new": 3]], #"kinds["mail.new"]"#, "expected a Policy, got an int"),
        Row(["kinds": [["policy": "count"]]], "kinds", "expected an object of Policy, got an array"),
        Row(["uids": [1, "2"]], "uids[1]", "expected an int, got a string"),
        Row(["uids": [1, nil]], "uids[1]", "expected an int, got null"),
        Row(["ratio": "1"], "ratio", "expected a float, got a string"),
        Row(["color": "pink"], "color", #"expected one of red, green, blue, got "pink""#),
        Row(["color": 1], "color", "expected one of red, green, blue, got an int"),
        Row(["tree": ["value": 1, "children": [["value": "2"]]]], "tree.children[0].value", "expected an int, got a string"),
        Row(["inline": ["x": 1, "y": ["z": 0]]], "inline.y.z", "expected a bool, got an int"),
    ])
    func checksEachParameterAgainstItsDeclaredType(row: Row) throws {
        let parameters = Self.good.merging(row.added) { _, new in new }
        #expect(Self.description.mismatch(inParametersOf: "Do", parameters) == row.mismatch)
        // The check prepared for every call of the method (what the server runs) says the same.
        let prepared = VarlinkParameterCheck(
            fields: try #require(Self.description.parameters["Do"]),
            definitions: Self.description.definitions
        )
        #expect(prepared.mismatch(parameters) == row.mismatch)
    }

    @Test func aMissingRequiredParameterIsNamed() {
        #expect(
            Self.description.mismatch(inParametersOf: "Do", ["payload": [:]])
                == VarlinkTypeMismatch(path: "name", reason: "missing; expected a string")
        )
        #expect(Self.description.mismatch(inParametersOf: "Nothing", ["extra": true]) == nil, "undeclared members are left alone")
        let prepared = VarlinkParameterCheck(fields: Self.description.parameters["Do"] ?? [], definitions: Self.description.definitions)
        #expect(prepared.mismatch(["payload": [:], "extra": 1]) == VarlinkTypeMismatch(path: "name", reason: "missing; expected a string"))
    }

    @Test func anObjectKeptAsTextIsCheckedWithoutBeingRead() throws {
        let call = try VarlinkCall(
            json: Array(#"{"method":"org.example.types.Do","parameters":{"name":"a","payload":{"deep":[1,2]},"uids":[1,"x"]}}"#.utf8),
            keepingAsText: { _ in ["payload", "uids"] }
        )
        let members = call.parameters
        guard case .text = members["payload"] else {
            Issue.record("the payload was not kept as text")
            return
        }
        #expect(
            Self.description.mismatch(inParametersOf: "Do", members)
                == VarlinkTypeMismatch(path: "uids[1]", reason: "expected an int, got a string")
        )
        let prepared = VarlinkParameterCheck(fields: Self.description.parameters["Do"] ?? [], definitions: Self.description.definitions)
        #expect(prepared.mismatch(members) == VarlinkTypeMismatch(path: "uids[1]", reason: "expected an int, got a string"))
        var fine = members
        fine["uids"] = [1]
        #expect(prepared.mismatch(fine) == nil, "a payload kept as text fits an object")
    }

    @Test func pathsQuoteMemberNamesThatAreNotPlain() {
        #expect(VarlinkTypeMismatch.path("kinds", member: "mail") == "kinds.mail")
        #expect(VarlinkTypeMismatch.path("kinds", member: "mail.new") == #"kinds["mail.new"]"#)
        #expect(VarlinkTypeMismatch.path("kinds", member: "a\u{0}b") == #"kinds["a\u0000b"]"#)
    }

    @Test(arguments: [
        ("interface a.b\nmethod A(x: Missing) -> ()\n", 2, "type Missing is not defined"),
        ("interface a.b\nmethod A() ()\n", 2, "expected '->' after the parameters of A"),
        ("interface a.b\nmethod A(x int) -> ()\n", 2, "expected ':' after 'x'"),
        ("interface a.b\ntype T (x: int, x: int)\n", 2, "field 'x' is declared twice"),
        ("interface a.b\nmethod A(x: ??int) -> ()\n", 2, "'?' twice"),
        ("interface a.b\n\nwhat A ()\n", 3, "expected method, type or error, got 'what'"),
        ("interface a.b\nmethod A(x: 3) -> ()\n", 2, "expected a type, got '3'"),
        ("interface a.b\nmethod a() -> ()\n", 2, "'method' needs a name starting upper-case"),
    ])
    func refusesTextThatIsNotTheLanguage(text: String, line: Int, reason: String) {
        #expect(throws: VarlinkInterfaceDescription.ParseError(line: line, reason: reason)) {
            try VarlinkInterfaceDescription(text: text)
        }
    }
}
