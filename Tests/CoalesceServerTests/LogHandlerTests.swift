import Logging
@testable import Systemd
import Testing

@Suite struct LogHandlerTests {
    @Test func metadataKeysBecomeJournalFieldNames() {
        #expect(JournalLogHandler.fieldName(for: "app") == "COALESCED_APP")
        #expect(JournalLogHandler.fieldName(for: "message.kind-2") == "COALESCED_MESSAGE_KIND_2")
    }

    @Test func prioritiesAreSyslogs() {
        #expect(JournalLogHandler.priority(.debug) == 7)
        #expect(JournalLogHandler.priority(.notice) == 5)
        #expect(JournalLogHandler.priority(.critical) == 2)
    }

    @Test func aStderrEntryStaysOneLineWhateverAPeerSent() {
        #expect(StderrLogHandler.escaped("a.b\nc.D\r\tx") == "a.b\\nc.D\\r\\tx")
        #expect(StderrLogHandler.escaped("plain") == "plain")
    }
}
