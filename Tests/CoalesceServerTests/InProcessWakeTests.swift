@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// A suspended app woken into the background for a post of a kind it declared `wakes: background`, on the manager in
/// process with a manual clock: a volatile kind's post wakes it at once (the durable path runs end to end in
/// `ProcessTests`' BackgroundWakeTests), its stopped process is continued before anything is sent, and what it is
/// told then (no callback, the events it held, the warning without a task) comes in order.
@Suite struct InProcessWakeTests {
    static let mail = "org.example.mail"
    static let kinds: JSONValue = [
        "mail.ping": ["policy": "count", "volatile": true, "wakes": "background"],
        "mail.subject": ["policy": "latest", "volatile": true],
    ]

    @Test func aVolatileWakingPostContinuesTheStoppedAppAndSendsWhatItHeldWithoutACallback() async throws {
        try await withManager(configuration: try configuration("[Apps]\nSuspensionDelaySec=100ms\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail, kinds: Self.kinds)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: Self.mail)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)
            await fixture.clock.advance(to: .milliseconds(200))
            #expect(app.process.isStopped)

            #expect(try await fixture.post(Self.mail, "mail.subject", ["s": "hello"]) == false)
            #expect(try app.state == .suspended, "a kind that does not wake is held")
            _ = try await fixture.post(Self.mail, "mail.ping", [:])
            let woken = try await app.sent(untilEvents: 2)
            #expect(woken.callbacks == [], "a wake brings no callback")
            #expect(Set(woken.events) == [#"event mail.subject count=1 payload={"s":"hello"}"#, "event mail.ping count=1 payload=-"])
            #expect(try app.state == .background)
            #expect(!app.process.isStopped && app.process.signals.last == SIGCONT)
            let explained = try fixture.manager.explain(name: Self.mail).explanation.reasons
            #expect(explained == [.woken(unacknowledged: 2, left: .seconds(30))])

            // Not acknowledged: warned without a task, then suspended (and stopped) at the budget's end.
            await fixture.clock.advance(to: .milliseconds(200 + 25_000))
            #expect(try await app.sent().callbacks == ["backgroundTaskWillExpire"])
            await fixture.clock.advance(to: .milliseconds(200 + 30_000))
            #expect(try app.state == .suspended)
        }
    }
}
