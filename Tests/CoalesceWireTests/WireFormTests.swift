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
