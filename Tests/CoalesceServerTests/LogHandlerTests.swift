import Logging
@testable import Systemd
import Testing

@Suite struct LogHandlerTests {
    @Test func metadataKeysBecomeJournalFieldNames() {
        #expect(JournalSink.fieldName(for: "app") == "COALESCED_APP")
        #expect(JournalSink.fieldName(for: "message.kind-2") == "COALESCED_MESSAGE_KIND_2")
    }

    @Test func prioritiesAreSyslogs() {
        #expect(JournalSink.priority(.debug) == 7)
        #expect(JournalSink.priority(.notice) == 5)
        #expect(JournalSink.priority(.critical) == 2)
    }

    @Test func aStderrEntryStaysOneLineWhateverAPeerSent() {
        #expect(StderrSink.escaped("a.b\nc.D\r\tx") == "a.b\\nc.D\\r\\tx")
        #expect(StderrSink.escaped("plain") == "plain")
    }
}
