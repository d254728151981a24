import CoalesceCore
import Testing

/// Strings that become keys or names take no control character, and kept text takes no NUL: refused with a reason
/// that names the character and the field, rather than cut at a NUL by SQLite, the environment or D-Bus.
@Suite struct ControlCharacterTests {
    static func request(id: String = "r", content: AlertContent = AlertContent(title: "t")) -> AlertRequest {
        AlertRequest(id: id, trigger: .now, content: content)
    }

    static func reason(_ request: AlertRequest) -> String? {
        do {
            try request.validate()
            return nil
        } catch {
            return error.description
        }
    }

    @Test(arguments: ["k\u{0}a", "k\na", "\t", "k\u{7f}", "k\u{1b}[31m"])
    func anIdWithAControlCharacterIsRefused(id: String) {
        let reason = Self.reason(Self.request(id: id))
        #expect(reason?.hasPrefix("the id contains the control character U+00") == true, "\(reason ?? "accepted")")
    }

    @Test func namesOfTheContentAreCheckedAndTheReasonNamesTheCharacterAndTheField() {
        #expect(Self.reason(Self.request(id: "k\u{0}a")) == "the id contains the control character U+0000 (NUL); ids and names take none")
        #expect(
            Self.reason(Self.request(content: AlertContent(title: "t", threadID: "a\nb")))
                == "threadId contains the control character U+000A (line feed); ids and names take none"
        )
        #expect(Self.reason(Self.request(content: AlertContent(title: "t", categoryID: "c\u{7f}")))?.contains("U+007F (DEL)") == true)
        #expect(
            Self.reason(Self.request(content: AlertContent(title: "t", actions: [AlertButton(id: "o\u{1}k", title: "OK")])))?
                .contains("U+0001") == true
        )
    }

    @Test func textTakesControlCharactersButNUL() {
        // Line feeds and tabs are text; NUL is not.
        #expect(Self.reason(Self.request(content: AlertContent(title: "two\nlines", body: "a\tb"))) == nil)
        #expect(
            Self.reason(Self.request(content: AlertContent(title: "t\u{0}x")))
                == "title contains U+0000 (NUL), which no text the daemon keeps or shows may hold"
        )
        #expect(Self.reason(Self.request(content: AlertContent(title: "t", body: "\u{0}")))?.hasPrefix("body contains U+0000") == true)
        #expect(Self.reason(Self.request(content: AlertContent(title: "t", sound: "a\u{0}")))?.hasPrefix("sound contains") == true)
        #expect(
            Self.reason(Self.request(content: AlertContent(title: "t", actions: [AlertButton(id: "ok", title: "O\u{0}K")])))?
                .hasPrefix("the title of action 'ok' contains U+0000") == true
        )
    }

    @Test func ordinaryStringsPass() {
        #expect(ControlCharacters.first(in: "Grüße, 日本語 ✓ and spaces") == nil)
        #expect(Self.reason(Self.request(id: "reminder-1.ä", content: AlertContent(title: "Grüße", threadID: "t 1"))) == nil)
    }

    @Test func aSumFieldWithAControlCharacterIsNoPolicy() {
        #expect(throws: PolicyTextError.self) { try CoalescingPolicy(parsing: "sum:un\u{0}read") }
        do {
            _ = try CoalescingPolicy(parsing: "sum:a\nb")
        } catch {
            #expect(error.description == "sum's member contains the control character U+000A (line feed); member names take none")
        }
    }
}
