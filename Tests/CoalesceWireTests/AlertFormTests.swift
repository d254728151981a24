import CoalesceCore
import CoalesceWire
import Testing
import Varlink

/// A notification request and a presentation read back what they write, in the one form the client library,
/// coalescectl, the desktop agent and the daemon share.
@Suite struct AlertFormTests {
    static let content = AlertContent(
        title: "Tea", subtitle: "", body: "is ready", sound: "bell", badge: 2, threadID: "kitchen",
        actions: [AlertButton(id: "drink", title: "Drink", foreground: true)], userInfo: #"{"pot":2}"#
    )

    static let requests: [AlertRequestForm] = [
        AlertRequestForm(id: "now", trigger: .now, content: AlertContent(title: "t"), style: .banner, late: .coalesce),
        AlertRequestForm(id: "at", trigger: .at(seconds: 1_800_000_000.5), content: content, style: .alert, late: .deliver),
        AlertRequestForm(
            id: "after", trigger: .after(.seconds(90), repeats: true), content: content, style: .banner,
            late: .dropAfter(.milliseconds(1500))
        ),
        AlertRequestForm(
            id: "calendar", trigger: .calendar(CalendarComponents(weekday: 2, hour: 8, minute: 30), timeZone: "Europe/Berlin", repeats: true),
            content: content, style: .banner, late: .coalesce
        ),
        AlertRequestForm(
            id: "floating", trigger: .calendar(CalendarComponents(month: 2, day: 29), timeZone: nil, repeats: false),
            content: content, style: .banner, late: .coalesce
        ),
    ]

    @Test(arguments: AlertFormTests.requests) func aRequestReadsBackWhatItWrites(request: AlertRequestForm) throws {
        #expect(try AlertRequestForm.reading(wire: request.wire()) == request)
        #expect(try AlertRequestForm.reading(wire: request.wire(compact: true)) == request)
    }

    /// An app's Schedule leaves out what says nothing; the daemon's replies and store write every member (in the
    /// order JSON text sorts them).
    @Test func theCompactFormLeavesOutAnEmptySubtitleBodyAndActions() {
        let request = AlertRequestForm(id: "r", trigger: .now, content: AlertContent(title: "t"), style: .banner, late: .coalesce)
        #expect(
            request.wire(compact: true).jsonText
                == #"{"content":{"title":"t","userInfo":{}},"id":"r","late":"coalesce","style":"banner"}"#
        )
        #expect(
            request.wire().jsonText
                == #"{"content":{"actions":[],"body":"","subtitle":"","title":"t","userInfo":{}},"id":"r","late":"coalesce","style":"banner"}"#
        )
    }

    @Test(arguments: [
        (#"{"content":{"title":"t"}}"#, "a request needs an id"),
        (#"{"id":"r"}"#, "a request needs content with a title"),
        (#"{"id":"r","content":{"title":"t","actions":[{"id":"a"}]}}"#, "an action needs an id and a title"),
        (#"{"id":"r","content":{"title":"t","userInfo":[1]}}"#, "userInfo is a JSON object"),
        (#"{"id":"r","content":{"title":"t"},"style":"toast"}"#, #"style "toast" is not banner or alert"#),
        (#"{"id":"r","content":{"title":"t"},"late":"dropAfter"}"#, "late dropAfter needs dropAfterSec, the grace period"),
        (#"{"id":"r","content":{"title":"t"},"dropAfterSec":5}"#, "dropAfterSec is only for late dropAfter"),
        (#"{"id":"r","content":{"title":"t"},"trigger":{"at":1,"after":2}}"#, "a trigger takes one of at, after and calendar, not at and after"),
        (#"{"id":"r","content":{"title":"t"},"trigger":{"at":1,"repeats":true}}"#, "an at trigger does not repeat; use calendar or after"),
        (#"{"id":"r","content":{"title":"t"},"trigger":{"repeats":true}}"#, "repeats needs a calendar or after trigger"),
    ])
    func aRequestThatIsNotOneSaysWhy(text: String, reason: String) throws {
        #expect(throws: WireFormError(reason)) { try AlertRequestForm.reading(wire: try JSONParser.parse(text)) }
    }

    /// The zone is resolved in its turn, before the content is read, as the daemon refuses a request.
    @Test func aZoneTheReaderCannotResolveIsRefusedInItsTurn() throws {
        let text = #"{"id":"r","trigger":{"calendar":{"hour":8,"timeZone":"Mars/Olympus"}}}"#
        #expect(throws: WireFormError("no such zone")) {
            try AlertRequestForm.reading(wire: try JSONParser.parse(text)) { _ throws(WireFormError) in
                throw WireFormError("no such zone")
            }
        }
    }

    @Test func aPresentationReadsBackWhatItWrites() throws {
        let presentation = AlertPresentationForm(
            app: "org.example.tea", id: "tea", serial: 7, content: Self.content, style: .alert, date: 1_800_000_000.25,
            count: 3, late: true
        )
        #expect(try AlertPresentationForm(wire: .object(presentation.wire)) == presentation)
        #expect(throws: WireFormError.self) { try AlertPresentationForm(wire: ["app": "org.example.tea", "id": "tea"]) }
    }
}
