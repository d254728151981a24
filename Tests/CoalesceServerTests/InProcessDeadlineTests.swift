@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The lifecycle's deadlines on the manager in process, on its manual clock: callbacks never acknowledged, background
/// tasks that run out of time, a process that ignores SIGTERM. Time moves only when the test moves it, so each
/// deadline is checked on both sides of its instant. The apps are ``TestApp``s that behave as the example app does
/// with the options the end-to-end tests gave it (`--stall-on`, `--task-on-background`, `--ignore-sigterm`).
@Suite struct InProcessDeadlineTests {
    static let mail = "org.example.mail"

    /// Whether the manager's log has an entry whose message is `message`.
    static func logged(_ fixture: ManagerFixture, _ message: String) -> Bool {
        fixture.logs.entries.contains { $0.message == message }
    }

    /// mail opened and sent home: its launch acknowledged, and willResignActive and didEnterBackground read (not
    /// acknowledged); returns their callbacks and the states their replies said the app was in.
    static func sentHome(_ fixture: ManagerFixture) async throws -> (TestApp, [JSONValue], states: [JSONValue?]) {
        try await fixture.register(Self.mail)
        let app = try await fixture.attach(Self.mail)
        #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        _ = try fixture.manager.deactivate(name: nil)
        let replies = try await app.replies()
        let home = replies.compactMap { $0["parameters"]?["callback"] }
        #expect(home.map { $0["kind"] } == ["lifecycle.willResignActive", "lifecycle.didEnterBackground"])
        return (app, home, replies.map { $0["parameters"]?["state"] })
    }

    /// As the example app with `--task-on-background upload`: its didEnterBackground begins a task, then is
    /// acknowledged. Returns the task's id.
    static func beginsATask(_ app: TestApp, _ fixture: ManagerFixture) throws -> Int {
        let task = try fixture.manager.beginBackgroundTask(name: Self.mail, uid: 0, taskName: "upload")
        try app.acknowledge()
        return task.id
    }

    @Test func aLaunchNeverAcknowledgedGetsTheAppKilledAndLogged() async throws {
        let configuration = try configuration("[Apps]\nAcknowledgeTimeoutSec=1s\n")
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            // As the example app with --stall-on didFinishLaunching: it reads its launch and acknowledges nothing.
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks.first == "willFinishLaunching")
            await fixture.clock.advance(to: .milliseconds(999))
            #expect(app.process.signals.isEmpty)
            #expect(try app.state == .active)
            await fixture.clock.advance(to: .seconds(1))
            #expect(app.process.signals == [SIGKILL])
            #expect(try app.state == .notRunning)
            let killed = fixture.logs.entries.first {
                $0.message == "org.example.mail: killed: didFinishLaunching was not acknowledged within AcknowledgeTimeoutSec=1s"
            }
            #expect(killed?.metadata["reason"] == "launchNotAcknowledged", "\(fixture.logs.entries.map(\.message))")
            #expect(killed?.level == .warning)
        }
    }

    @Test func didEnterBackgroundNeverAcknowledgedGetsTheAppKilled() async throws {
        let configuration = try configuration("[Apps]\nAcknowledgeTimeoutSec=1s\n")
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            let (app, home, _) = try await Self.sentHome(fixture)
            // As the example app with --stall-on didEnterBackground: willResignActive acknowledged, then nothing.
            try app.acknowledge(upTo: UInt64(home[0]["seq"]?.intValue ?? 0))
            await fixture.clock.advance(to: .milliseconds(999))
            #expect(app.process.signals.isEmpty)
            #expect(try app.state == .background)
            await fixture.clock.advance(to: .seconds(1))
            #expect(app.process.signals == [SIGKILL])
            #expect(try app.state == .notRunning)
            #expect(
                Self.logged(
                    fixture, "org.example.mail: killed: didEnterBackground was not acknowledged within AcknowledgeTimeoutSec=1s"
                ),
                "\(fixture.logs.entries.map(\.message))"
            )
        }
    }

    @Test func aTaskNeverEndedIsWarnedThenEndedAndTheAppSuspended() async throws {
        let configuration = try configuration("[Apps]\nBackgroundTaskBudgetSec=2s\nBackgroundTaskWarningSec=1s\n")
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            let (app, _, _) = try await Self.sentHome(fixture)
            let task = try Self.beginsATask(app, fixture)
            #expect(task == 1)
            #expect(try app.state == .background, "a task keeps the app running")
            #expect(try app.snapshot.tasks == 1)
            await fixture.clock.advance(to: .milliseconds(999))
            #expect(try await app.callbacks().isEmpty)
            // The library hands backgroundTaskWillExpire to the task's expiration handler.
            await fixture.clock.advance(to: .seconds(1))
            let warned = try await app.callbacks()
            #expect(warned.map { $0["kind"] } == ["lifecycle.backgroundTaskWillExpire"])
            #expect(warned.first?["task"] == .int(Int64(task)))
            try app.acknowledge()
            await fixture.clock.advance(to: .milliseconds(1999))
            #expect(try app.state == .background)
            await fixture.clock.advance(to: .seconds(2))
            #expect(try app.state == .suspended)
            #expect(
                fixture.logs.entries.contains { $0.message.contains("background tasks expired") },
                "\(fixture.logs.entries.map(\.message))"
            )
        }
    }

    @Test func aTaskEndedFromItsExpirationHandlerSuspendsTheAppWithoutAnExpiry() async throws {
        let configuration = try configuration("[Apps]\nBackgroundTaskBudgetSec=2s\nBackgroundTaskWarningSec=1s\n")
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            let (app, _, _) = try await Self.sentHome(fixture)
            let task = try Self.beginsATask(app, fixture)
            await fixture.clock.advance(to: .seconds(1))
            let warned = try await app.callbacks()
            #expect(warned.map { $0["kind"] } == ["lifecycle.backgroundTaskWillExpire"])
            // As the example app with --end-task-on-expiry: the handler ends the task, then the warning is
            // acknowledged.
            try fixture.manager.endBackgroundTask(name: Self.mail, uid: 0, id: task)
            try app.acknowledge()
            #expect(try app.state == .suspended)
            await fixture.clock.advance(to: .seconds(3))
            #expect(try app.state == .suspended)
            #expect(
                !fixture.logs.entries.contains { $0.message.contains("background tasks expired") },
                "the app ended its task itself"
            )
        }
    }

    @Test func anAppThatRunsOutOfBackgroundTimeIsTerminatedWhenSoConfigured() async throws {
        let configuration = try configuration(
            "[Apps]\nBackgroundTaskBudgetSec=1s\nBackgroundTaskWarningSec=500ms\nBackgroundTaskExpiry=terminate\n"
        )
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            let (app, _, _) = try await Self.sentHome(fixture)
            _ = try Self.beginsATask(app, fixture)
            await fixture.clock.advance(to: .milliseconds(500))
            #expect(try await app.callbacks().map { $0["kind"] } == ["lifecycle.backgroundTaskWillExpire"])
            try app.acknowledge()
            await fixture.clock.advance(to: .seconds(1))
            #expect(try await app.sent().callbacks == ["willTerminate"])
            #expect(app.ended, "its stream is ended")
            #expect(try app.state == .notRunning)
            #expect(Self.logged(fixture, "org.example.mail: background tasks expired, terminated"))
        }
    }

    @Test func anAppThatIgnoresSIGTERMIsKilledAfterTheGracePeriod() async throws {
        let configuration = try configuration("[Apps]\nTerminateGraceSec=300ms\n")
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.terminate(name: Self.mail)
            // As the example app with --stall-on willTerminate --ignore-sigterm: it never acknowledges, and a
            // ``FakeProcess`` lives on through SIGTERM.
            #expect(try await app.sent().callbacks == ["willTerminate"])
            await fixture.clock.advance(to: .milliseconds(299))
            #expect(app.process.signals.isEmpty)
            await fixture.clock.advance(to: .milliseconds(300))
            #expect(app.process.signals == [SIGTERM], "not acknowledged: SIGTERM after the grace")
            await fixture.clock.advance(to: .milliseconds(599))
            #expect(app.process.signals == [SIGTERM])
            await fixture.clock.advance(to: .milliseconds(600))
            #expect(app.process.signals == [SIGTERM, SIGKILL], "still running a grace later: SIGKILL")
            #expect(!app.process.isAlive)
            let pid = app.process.pid
            #expect(
                Self.logged(fixture, "org.example.mail: pid \(pid) did not exit within 0.3 s of SIGTERM; killed"),
                "\(fixture.logs.entries.map(\.message))"
            )
        }
    }

    @Test func aTaskEndedInTimeLetsTheAppBeSuspended() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let (app, _, states) = try await Self.sentHome(fixture)
            #expect(states == ["inactive", "background"], "willResignActive in inactive, didEnterBackground in background")
            let task = try Self.beginsATask(app, fixture)
            #expect(try app.state == .background)
            // As the example app with --end-task-after 0.5.
            await fixture.clock.advance(to: .milliseconds(500))
            try fixture.manager.endBackgroundTask(name: Self.mail, uid: 0, id: task)
            #expect(try app.state == .suspended)
            #expect(try await app.sent() == TestApp.Sent(), "nothing but the two callbacks of going home")
        }
    }
}
