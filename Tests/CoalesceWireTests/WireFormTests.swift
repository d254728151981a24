import CoalesceCore
import CoalesceWire
import Testing
import Varlink

/// The forms daemon, client library and coalescectl share read back what they write, and refuse what is not one.
@Suite struct WireFormTests {
    static let policies: [CoalescingPolicy] = [
        .latest, .first, .count, .sum(field: "unread"), .merge, .netChange, .queue(bound: 10),
    ]

    @Test(arguments: WireFormTests.policies) func policyReadsBackItsWireForm(policy: CoalescingPolicy) {
        #expect(CoalescingPolicy(wire: policy.wire) == policy)
    }

    @Test(arguments: WireFormTests.policies) func policyReadsBackItsText(policy: CoalescingPolicy) throws {
        #expect(try CoalescingPolicy(parsing: policy.text) == policy)
    }

    @Test func policyWireFormRefusesWhatIsNotOne() throws {
        let bad = [
            #"{}"#, #"{"policy":"sometimes"}"#, #"{"policy":"sum"}"#, #"{"policy":"sum","field":""}"#,
            #"{"policy":"queue","bound":0}"#, #"{"policy":"queue","bound":10001}"#,
        ]
        for text in bad { #expect(CoalescingPolicy(wire: try JSONParser.parse(text)) == nil, "\(text)") }
    }

    /// The same problem gets the same reason from the command line's text and from the wire, each in its notation.
    @Test(arguments: [
        ("lastest", #"{"policy":"lastest"}"#, PolicyProblem.unknown("lastest")),
        ("sum", #"{"policy":"sum"}"#, .sumWithoutField),
        ("sum:", #"{"policy":"sum","field":""}"#, .sumWithoutField),
        ("queue", #"{"policy":"queue"}"#, .queueWithoutBound),
        ("queue:0", #"{"policy":"queue","bound":0}"#, .boundOutOfRange("0")),
        ("queue:10001", #"{"policy":"queue","bound":10001}"#, .boundOutOfRange("10001")),
        ("sum:" + String(repeating: "f", count: 129), #"{"policy":"sum","field":""# + String(repeating: "f", count: 129) + #""}"#, .fieldTooLong(129)),
    ])
    func aPolicyThatIsNotOneSaysWhyInBothForms(text: String, wire: String, problem: PolicyProblem) throws {
        #expect(throws: PolicyTextError.self) { try CoalescingPolicy(parsing: text) }
        do {
            _ = try CoalescingPolicy(parsing: text)
        } catch {
            #expect(error.description == problem.text)
        }
        #expect(CoalescingPolicy.reading(wire: try JSONParser.parse(wire)) == .failure(problem))
    }

    @Test func policyReasonsReadAsCoalescectlSaysThem() {
        #expect(
            PolicyProblem.unknown("lastest").text
                == "'lastest' is not a policy: latest, first, count, sum:FIELD, merge, netChange or queue:BOUND"
        )
        #expect(
            PolicyProblem.unknown("lastest").wire
                == "'lastest' is not a policy: latest, first, count, sum (with field), merge, netChange or queue (with bound)"
        )
        #expect(PolicyProblem.sumWithoutField.text == "sum needs the member to add up, such as sum:unread")
        #expect(PolicyProblem.queueWithoutBound.text == "queue needs a bound, such as queue:10")
    }

    @Test func kindDeclarationReadsBackItsWireForm() throws {
        let declarations = [
            KindDeclaration(), KindDeclaration(.sum(field: "n"), volatile: true),
            KindDeclaration(.queue(bound: 3), backgroundMode: "fetch"),
        ]
        for declaration in declarations { #expect(KindDeclaration(wire: declaration.wire) == declaration) }
        #expect(KindDeclaration(wire: try JSONParser.parse(#"{"policy":"count","volatile":1}"#)) == nil)
        #expect(KindDeclaration(wire: try JSONParser.parse(#"{"policy":"count","backgroundMode":""}"#)) == nil)
    }

    @Test func postersReadBackTheirWireForm() throws {
        let posters = Posters(anyone: true, uids: [1000, 1001], groups: ["mail"])
        #expect(Posters(wire: posters.wire) == posters)
        #expect(Posters(wire: try JSONParser.parse(#"{"uids":[-1]}"#)) == nil)
        #expect(Posters(wire: try JSONParser.parse(#"{"groups":[7]}"#)) == nil)
        #expect(Posters(wire: try JSONParser.parse(#"{"anyone":"yes"}"#)) == nil, "not read as false")
        #expect(Posters(wire: try JSONParser.parse(#"{"uids":1000}"#)) == nil, "not read as none")
        #expect(Posters(wire: try JSONParser.parse(#"{"uids":[1000.5]}"#)) == nil)
        #expect(Posters(wire: try JSONParser.parse(#"{"anyone":null,"uids":null}"#)) == Posters())
    }
}
