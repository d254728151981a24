import CoalesceCore
import CoalesceWire
import Testing
import Varlink

/// A pending entry and a response read back what they write, in the one form the daemon writes and the client
/// library, coalescectl and the desktop agent read or send.
@Suite struct PendingAndResponseFormTests {
    static let pending: [AlertPendingForm] = [
        AlertPendingForm(request: AlertFormTests.requests[0], next: 1_800_000_000),
        AlertPendingForm(request: AlertFormTests.requests[2], next: 1_800_000_090.25, lastFire: 1_800_000_000.25),
        AlertPendingForm(request: AlertFormTests.requests[3], next: 1_800_003_600, calendar: "Mon *-*-* 08:30:00 Europe/Berlin"),
    ]

    @Test(arguments: PendingAndResponseFormTests.pending) func aPendingEntryReadsBackWhatItWrites(entry: AlertPendingForm) throws {
        #expect(try AlertPendingForm(wire: .object(entry.wire)) == entry)
    }

    /// ListPending's entry as the daemon writes it: the request with all its members, then the dates; `lastFire`
    /// and `calendar` only when there is one.
    @Test func aPendingEntryWritesTheRequestWholeAndItsDates() {
        let request = AlertRequestForm(id: "r", trigger: .after(.seconds(90), repeats: false), content: AlertContent(title: "t"), style: .banner, late: .coalesce)
        #expect(
            JSONValue.object(AlertPendingForm(request: request, next: 1_800_000_090.5).wire).jsonText
                == #"{"next":1800000090.5,"request":{"content":{"actions":[],"body":"","subtitle":"","title":"t","userInfo":{}},"id":"r","#
                + #""late":"coalesce","style":"banner","trigger":{"after":90.0,"repeats":false}}}"#
        )
    }

    @Test(arguments: [
        (#"[1]"#, "a pending entry is an object"),
        (#"{"next":1}"#, "a pending entry without request or next"),
        (#"{"request":{"id":"r","content":{"title":"t"}}}"#, "a pending entry without request or next"),
        (#"{"request":{"id":"r","content":{"title":"t"}},"next":"soon"}"#, "a pending entry without request or next"),
        (#"{"request":{"id":"r","content":{"title":"t"}},"next":1,"lastFire":"then"}"#, #"lastFire "then" is not a number of seconds since the epoch"#),
        (#"{"request":{"id":"r","content":{"title":"t"}},"next":1,"calendar":8}"#, "calendar 8 is not a string"),
        (#"{"request":{"content":{"title":"t"}},"next":1}"#, "a request needs an id"),
    ])
    func aPendingEntryThatIsNotOneSaysWhy(text: String, reason: String) throws {
        #expect(throws: WireFormError(reason)) { try AlertPendingForm(wire: try JSONParser.parse(text)) }
    }

    @Test(arguments: [
        AlertResponseForm(id: "tea", action: "default"),
        AlertResponseForm(id: "tea", action: "drink", text: "two sugars", userInfo: #"{"pot":2}"#),
        AlertResponseForm(id: "tea", action: "dismiss", userInfo: #"{"a":[1,2.5,"x"],"b":{"c":null}}"#),
    ])
    func aResponseReadsBackWhatItWrites(response: AlertResponseForm) throws {
        #expect(try AlertResponseForm(wire: .object(response.wire)) == response)
    }

    /// The event's payload as the daemon writes it, and Respond's parameters as coalescectl and the agent send them.
    @Test func aResponseWritesTheEventAndRespondsParameters() {
        let response = AlertResponseForm(id: "tea", action: "drink", text: "now", userInfo: #"{"pot":2}"#)
        #expect(JSONValue.object(response.wire).jsonText == #"{"action":"drink","id":"tea","text":"now","userInfo":{"pot":2}}"#)
        #expect(JSONValue.object(response.respond(app: "org.example.tea")).jsonText == #"{"action":"drink","app":"org.example.tea","id":"tea","text":"now"}"#)
        let opened = AlertResponseForm(id: "tea", action: "default")
        #expect(JSONValue.object(opened.wire).jsonText == #"{"action":"default","id":"tea","userInfo":{}}"#)
        #expect(JSONValue.object(opened.respond(app: "a")).jsonText == #"{"action":"default","app":"a","id":"tea"}"#)
    }

    /// A payload without user info (or with null) hands back an empty object, as one scheduled without any.
    @Test func aResponseWithoutUserInfoHandsBackAnEmptyObject() throws {
        #expect(try AlertResponseForm(wire: try JSONParser.parse(#"{"id":"r","action":"default"}"#)).userInfo == "{}")
        #expect(try AlertResponseForm(wire: try JSONParser.parse(#"{"id":"r","action":"default","userInfo":null}"#)).userInfo == "{}")
    }

    @Test(arguments: [
        (#""default""#, "a response is an object"),
        (#"{"action":"default"}"#, "a response without id or action"),
        (#"{"id":"r","action":7}"#, "a response without id or action"),
        (#"{"id":"r","action":"default","text":5}"#, "a response's text 5 is not a string"),
        (#"{"id":"r","action":"default","userInfo":[1]}"#, "a response's userInfo is a JSON object"),
    ])
    func aResponseThatIsNotOneSaysWhy(text: String, reason: String) throws {
        #expect(throws: WireFormError(reason)) { try AlertResponseForm(wire: try JSONParser.parse(text)) }
    }
}
