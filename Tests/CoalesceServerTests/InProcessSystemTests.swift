@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// What the system around the apps does to them, on the manager in process: the screen lock as events, the
/// system's sleep as an interruption, and a suspended app's process stopped and continued, read from what each
/// ``TestApp`` is sent and the signals its ``FakeProcess`` kept. logind, the seat's session and the stopped task in
/// /proc are tested end to end in the sandbox (`SleepTests`, `LockTests`) and in `ProcessTests`.
@Suite struct InProcessSystemTests {
    static let mail = "org.example.mail"
    static let chat = "org.example.chat"

    /// Registers and attaches an app, launched into the foreground and acknowledged.
    func activeApp(_ name: String, _ fixture: ManagerFixture) async throws -> TestApp {
        try await fixture.register(name)
        let app = try await fixture.attach(name)
        #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        return app
    }

    /// The callbacks and events `app` is sent until at least `count` came: an event the daemon posts goes out once
    /// its write is on disk.
    func callbacks(_ app: TestApp, atLeast count: Int) async throws -> [String] {
        try await app.replies(atLeast: count).compactMap { reply in
            reply["parameters"]?["callback"]?["kind"]?.stringValue.map { kind in
                kind.hasPrefix("lifecycle.") ? String(kind.dropFirst("lifecycle.".count)) : kind
            }
        }
    }

    @Test func theScreenLockReachesRunningAppsAtOnceAndASuspendedOneAsItsNetChangeOnWake() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let chat = try await self.activeApp(Self.chat, fixture)
            try chat.acknowledge()
            _ = try fixture.manager.deactivate(name: Self.chat)
            #expect(try await chat.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try chat.acknowledge()
            #expect(try chat.state == .suspended)
            let mail = try await self.activeApp(Self.mail, fixture)

            // Locked and unlocked while chat is suspended: mail hears both at once, chat nothing, now or on its wake.
            #expect(fixture.manager.protectedDataChanged(available: false) == 1)
            #expect(try await self.callbacks(mail, atLeast: 1) == ["protectedDataWillBecomeUnavailable"])
            try mail.acknowledge()
            #expect(fixture.manager.protectedDataChanged(available: true) == 1)
            #expect(try await self.callbacks(mail, atLeast: 1) == ["protectedDataDidBecomeAvailable"])
            try mail.acknowledge()
            #expect(try await chat.sent().callbacks.isEmpty)
            _ = try fixture.manager.activate(name: Self.chat)
            // An event posted after the wake comes after anything the wake sent: nothing of the lock.
            #expect(try await fixture.post(Self.chat, "mail.ping", [:]) == true)
            #expect(try await self.callbacks(chat, atLeast: 3) == ["willEnterForeground", "didBecomeActive", "mail.ping"])
            try chat.acknowledge()

            // Locked while it is suspended again: its wake tells it, after the wake's callbacks, once.
            _ = try fixture.manager.deactivate(name: Self.chat)
            _ = try await chat.sent()
            try chat.acknowledge()
            #expect(try chat.state == .suspended)
            _ = fixture.manager.protectedDataChanged(available: false)
            #expect(try await chat.sent().callbacks.isEmpty)
            _ = try fixture.manager.activate(name: Self.chat)
            #expect(
                try await self.callbacks(chat, atLeast: 3)
                    == ["willEnterForeground", "didBecomeActive", "protectedDataWillBecomeUnavailable"]
            )
        }
    }

    @Test func sleepInterruptsTheActiveAppAndItsWakeMakesItActiveAgain() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await self.activeApp(Self.mail, fixture)
            let told = fixture.manager.systemWillSleep()
            #expect(told.map(\.app.value) == [Self.mail])
            #expect(told.first?.attached == true)
            #expect(try await mail.sent().callbacks == ["willResignActive"])
            #expect(try mail.state == .inactive)
            // The sequence the sleep waits to be acknowledged is the callback it sent.
            #expect(told.first?.sequence == mail.lastSequence)
            try mail.acknowledge()
            #expect(fixture.manager.systemDidWake(told.map(\.app)).map(\.value) == [Self.mail])
            #expect(try await mail.sent().callbacks == ["didBecomeActive"])
            #expect(try mail.state == .active)
        }
    }

    @Test func aSuspendedAppIsStoppedAfterTheDelayAndContinuedWhenWoken() async throws {
        try await withManager(configuration: try configuration("[Apps]\nSuspension=stop\nSuspensionDelaySec=100ms\n")) {
            (fixture: ManagerFixture) async throws in
            let mail = try await self.activeApp(Self.mail, fixture)
            _ = try fixture.manager.deactivate(name: Self.mail)
            #expect(try await mail.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try mail.acknowledge()
            #expect(try mail.state == .suspended)
            await fixture.clock.advance(by: .milliseconds(99))
            #expect(mail.process.signals.isEmpty, "not before the delay")
            await fixture.clock.advance(by: .milliseconds(1))
            #expect(mail.process.signals == [SIGSTOP])
            #expect(try mail.snapshot.hold == .stopped)
            _ = try fixture.manager.activate(name: Self.mail)
            #expect(mail.process.signals == [SIGSTOP, SIGCONT])
            #expect(!mail.process.isStopped)
            #expect(try await mail.sent().callbacks == ["willEnterForeground", "didBecomeActive"])
            #expect(try mail.snapshot.hold == nil)
        }
    }
}
