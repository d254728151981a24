@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The transition table of DESIGN.md §1 on the manager in process
/// (``withManager(configuration:directory:processes:units:logs:_:)``): its apps are ``TestApp``s that acknowledge
/// what they read as the example app does, and the operator's requests (`io.coalesced.System`) are the manager's
/// calls they become. The callback orders are seed 004's; the end-to-end checks are in `ProcessTests`.
@Suite struct InProcessLifecycleTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    /// Registers `name` and attaches it as its user opens it: launched into the foreground, its launch acknowledged.
    static func opened(_ name: String, _ fixture: ManagerFixture, traits: AppTraits = AppTraits()) async throws -> TestApp {
        try await fixture.register(name, traits: traits)
        let app = try await fixture.attach(name)
        #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        return app
    }

    @Test func launchHomeAndBackToTheForeground() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            // Launched by its user: an app that attaches on its own goes to the foreground.
            let launched = try await app.callbacks()
            #expect(launched.map { $0["kind"] } == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            #expect(
                launched.first?["launchOptions"] == ["destination": "foreground", "reason": "user", "restoration": "pristine"],
                "nothing restored"
            )
            try app.acknowledge()
            #expect(try app.state == .active)
            #expect(try app.snapshot.pid == app.process.pid)

            // Home: willResignActive, didEnterBackground, and once that is acknowledged, suspended.
            #expect(try fixture.manager.deactivate(name: nil).registration.name.value == Self.mail)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)

            // Back to the foreground (fast app switch).
            _ = try fixture.manager.activate(name: Self.mail)
            #expect(try await app.sent().callbacks == ["willEnterForeground", "didBecomeActive"])
            try app.acknowledge()
            #expect(try app.state == .active)

            // Home and straight back, before it was suspended: the same two callbacks each way.
            _ = try fixture.manager.deactivate(name: nil)
            _ = try fixture.manager.activate(name: Self.mail)
            #expect(
                try await app.sent().callbacks
                    == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]
            )
            try app.acknowledge()
            #expect(try await app.sent() == TestApp.Sent())
        }
    }

    @Test func anotherAppComingForwardSendsTheFirstToTheBackground() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await Self.opened(Self.mail, fixture)
            let maps = try await Self.opened(Self.maps, fixture)
            #expect(try await mail.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try mail.acknowledge()
            #expect(try mail.state == .suspended)

            _ = try fixture.manager.activate(name: Self.mail)
            #expect(try await maps.sent().callbacks == ["willResignActive", "didEnterBackground"])
            #expect(try await mail.sent().callbacks == ["willEnterForeground", "didBecomeActive"])
            try maps.acknowledge()
            try mail.acknowledge()
            #expect(try maps.state == .suspended)
            #expect(try mail.state == .active)
        }
    }

    @Test func sleepAndWakeACallAndLeavingDuringACall() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let app = try await Self.opened(Self.mail, fixture)

            // Sleep and wake, or a call that ends: willResignActive … didBecomeActive.
            #expect(try fixture.manager.interrupt(name: nil, begins: true).state == .inactive)
            #expect(try await app.sent().callbacks == ["willResignActive"])
            try app.acknowledge()
            #expect(try fixture.manager.interrupt(name: nil, begins: false).state == .active)
            #expect(try await app.sent().callbacks == ["didBecomeActive"])
            try app.acknowledge()

            // A call, and the user leaves to the home screen during it: no second willResignActive (seed 004 2D-b).
            _ = try fixture.manager.interrupt(name: Self.mail, begins: true)
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)
            #expect(try await app.sent() == TestApp.Sent())
        }
    }

    @Test func purgeKillsWithoutACallbackAndTheRelaunchRestoresState() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let first = try await Self.opened(Self.mail, fixture)
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await first.sent().callbacks == ["willResignActive", "didEnterBackground"])
            // As the example app does with --save-state: saved in its didEnterBackground, then acknowledged.
            try await fixture.manager.saveState(name: Self.mail, uid: 0, data: "draft=42")
            try first.acknowledge()
            #expect(try first.state == .suspended)

            #expect(try fixture.manager.purge(name: nil, count: 1).map(\.value) == [Self.mail])
            #expect(first.process.signals == [SIGKILL], "purged without notice: SIGKILL")
            #expect(!first.process.isAlive)
            #expect(try await first.sent() == TestApp.Sent(), "a purged app hears nothing")
            #expect(first.ended, "its stream is ended")
            #expect(try first.state == .notRunning)

            // Relaunch: Launch waits for the app's process to attach (it has no launch unit).
            let launch = try await fixture.launch(Self.mail)
            let second = try await fixture.attach(Self.mail)
            let launched = try await second.callbacks()
            #expect(launched.map { $0["kind"] } == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            #expect(launched.first?["launchOptions"] == ["destination": "foreground", "reason": "user", "restoration": "restore", "restoredState": "draft=42"])
            #expect(try await launch.value.state == .active)
        }
    }

    @Test func launchIntoTheBackgroundThenSuspended() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let waiting = try await fixture.launch(Self.mail, destination: .background)
            let app = try await fixture.attach(Self.mail)
            let launched = try await app.callbacks()
            #expect(launched.map { $0["kind"] } == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didEnterBackground"])
            #expect(launched.first?["launchOptions"] == ["destination": "background", "reason": "user", "restoration": "pristine"])
            #expect(try await waiting.value.registration.name.value == Self.mail)
            try app.acknowledge()
            #expect(try app.state == .suspended)
        }
    }

    /// willTerminate, the stream's end, and SIGTERM once the app acknowledged it; an app that then exits is not
    /// killed.
    @Test func terminateSendsWillTerminateAndTheAppExits() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let app = try await Self.opened(Self.mail, fixture)
            #expect(try fixture.manager.terminate(name: Self.mail).state == .notRunning)
            #expect(try await app.sent().callbacks == ["willTerminate"])
            #expect(app.ended, "its stream is ended")
            #expect(app.process.signals.isEmpty, "not signalled before it acknowledged")
            try app.acknowledge()
            #expect(app.process.signals == [SIGTERM], "acknowledged: SIGTERM at once")
            app.process.exit()
            await fixture.clock.advance(by: .seconds(60))
            #expect(app.process.signals == [SIGTERM], "it exited: no SIGKILL")
            #expect(try app.state == .notRunning)
        }
    }

    @Test func anExitsOnSuspendAppIsTerminatedInsteadOfSuspended() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let app = try await Self.opened(Self.mail, fixture, traits: AppTraits(exitsOnSuspend: true))
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "willTerminate"])
            #expect(app.ended, "its stream is ended")
            try app.acknowledge()
            app.process.exit()
            #expect(try app.state == .notRunning)
        }
    }

    @Test func anAppWithABackgroundModeStaysInTheBackground() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let app = try await Self.opened(Self.mail, fixture, traits: AppTraits(backgroundModes: ["audio"]))
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            // Past its acknowledgement of didEnterBackground, which an event's acknowledgement covers.
            #expect(try await fixture.post(Self.mail, "track.changed", ["n": 1]) == true, "background: sent at once")
            #expect(try await app.sent().events == [#"event track.changed count=1 payload={"n":1}"#])
            try app.acknowledge()
            #expect(try fixture.manager.queue(of: Self.mail).unacknowledged == 0)
            #expect(try app.state == .background, "playing audio: not suspended")
        }
    }

    @Test func aSecondAttachReplacesTheFirst() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let first = try await Self.opened(Self.mail, fixture)
            let second = try await fixture.attach(Self.mail)
            await #expect(throws: AppError.replaced(app: Self.mail)) { try await first.finished() }
            #expect(AppError.replaced(app: Self.mail).varlinkName == "io.coalesced.App.Replaced")
            let replies = try await second.replies()
            #expect(replies.map { $0["parameters"]?["state"] } == ["active"], "the app was running: no launch")
            #expect(try second.state == .active)
            #expect(try second.snapshot.pid == second.process.pid)
        }
    }
}
