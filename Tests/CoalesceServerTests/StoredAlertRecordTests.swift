@testable import CoalesceServer
import CoalesceCore
import Testing

/// A notification request as the store hands it back: a name with a control character is an older daemon's and is
/// taken up, but nothing else Schedule refuses is, so that a damaged row cannot stop the scheduler.
@Suite struct StoredAlertRecordTests {
    static func text(id: String, trigger: String) -> String {
        #"{"request":{"id":"\#(id)","trigger":\#(trigger),"content":{"title":"t"}},"since":0,"fires":0,"intervalDue":0}"#
    }

    @Test func aControlCharacterInTheIdDoesNotLetARepeatingIntervalOfZeroThrough() throws {
        let app = try AppName("org.example.mail")
        let zones = ZoneDatabase()
        #expect(throws: WireProblem.self) {
            try NotificationWire.record(Self.text(id: "w\\u007f", trigger: #"{"after":0,"repeats":true}"#), app: app, zones: zones)
        }
        let older = try NotificationWire.record(Self.text(id: "w\\u007f", trigger: #"{"after":60,"repeats":true}"#), app: app, zones: zones)
        #expect(older.request.id == "w\u{7f}")
    }
}
