@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

/// The screen lock, a sleep and an operator's Interrupt on the manager in process: each interrupts the app on screen,
/// and the app is active again only once the last of them has ended. The lock through logind is tested end to end
/// in the sandbox (`LockTests`).
@Suite struct InProcessInterruptionTests {
    static let mail = "org.example.mail"

    /// What `app` is sent until at least `count` came: a callback as its kind without `lifecycle.`, a scene's with
    /// the scene's id first. The lock's events go out once their writes are on disk.
    static func sent(_ app: TestApp, atLeast count: Int) async throws -> [String] {
        try await app.replies(atLeast: count).compactMap { reply in
            guard let callback = reply["parameters"]?["callback"], let kind = callback["kind"]?.stringValue else { return nil }
            let name = kind.split(separator: ".").last.map(String.init) ?? kind
            return callback["scene"]?.stringValue.map { "\($0) \(name)" } ?? name
        }
    }

    /// The journal's reasons of `app`'s transitions, from a monitor of them.
    static func reasons(_ monitor: MonitorStream, count: Int) async throws -> [String] {
        try await monitor.read { $0.count >= count }.compactMap { record in
            record.record["scene"] == nil ? record.record["reason"]?.stringValue : nil
        }
    }

    @Test func theLockInterruptsTheActiveAppBeforeItsDataGoesAndTheUnlockMakesItActiveBeforeItComesBack() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await InProcessLifecycleTests.opened(Self.mail, fixture)
            let monitor = try await fixture.monitor()
            #expect(fixture.manager.screenLockChanged(locked: true) == 1)
            let locked = try await mail.replies(atLeast: 2).compactMap { $0["parameters"]?["callback"]?["kind"]?.stringValue }
            #expect(locked == ["lifecycle.willResignActive", "lifecycle.protectedDataWillBecomeUnavailable"])
            #expect(try mail.state == .inactive)
            try mail.acknowledge()

            // A sleep and its wake while the screen is locked: the app stays inactive; so does the end of an
            // operator's interruption, which is not the lock's.
            let told = fixture.manager.systemWillSleep()
            #expect(told.isEmpty, "nothing more to tell an app the lock interrupted")
            #expect(fixture.manager.systemDidWake([try AppName(Self.mail)]).isEmpty)
            #expect(throws: SystemError.self) { try fixture.manager.interrupt(name: Self.mail, begins: false) }
            #expect(try await mail.sent() == TestApp.Sent())
            #expect(try mail.state == .inactive)

            #expect(fixture.manager.screenLockChanged(locked: false) == 1)
            let unlocked = try await mail.replies(atLeast: 2).compactMap { $0["parameters"]?["callback"]?["kind"]?.stringValue }
            #expect(unlocked == ["lifecycle.didBecomeActive", "lifecycle.protectedDataDidBecomeAvailable"])
            #expect(try mail.state == .active)
            #expect(try await Self.reasons(monitor, count: 2) == ["lock", "unlock"])
        }
    }

    @Test func aSleepThatBeganFirstStillWaitsForTheUnlockOfALockThatCameMeanwhile() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await InProcessLifecycleTests.opened(Self.mail, fixture)
            let told = fixture.manager.systemWillSleep()
            #expect(try await mail.sent().callbacks == ["willResignActive"])
            fixture.manager.screenLockChanged(locked: true)
            #expect(try await Self.sent(mail, atLeast: 1) == ["protectedDataWillBecomeUnavailable"])
            // The wake ends the sleep's part: the lock's remains, and the unlock ends it.
            #expect(fixture.manager.systemDidWake(told.map(\.app)).isEmpty)
            #expect(try mail.state == .inactive)
            fixture.manager.screenLockChanged(locked: false)
            #expect(try await Self.sent(mail, atLeast: 2) == ["didBecomeActive", "protectedDataDidBecomeAvailable"])
            #expect(try mail.state == .active)
        }
    }

    @Test func theLockInterruptsAnAppsFocusedSceneAndTheAppFollows() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await InProcessLifecycleTests.opened(Self.mail, fixture)
            fixture.manager.reportWindows(
                [try InProcessSceneTests.window("w", of: Self.mail, .focused)], source: .wayland, uid: 0
            )
            #expect(try await mail.sent().callbacks == ["w willConnect", "w willEnterForeground", "w didBecomeActive"])
            fixture.manager.screenLockChanged(locked: true)
            #expect(try await Self.sent(mail, atLeast: 3) == ["w willResignActive", "willResignActive", "protectedDataWillBecomeUnavailable"])
            // The focus moving meanwhile changes nothing of the interruption.
            fixture.manager.reportWindows(
                [try InProcessSceneTests.window("w", of: Self.mail, .focused, title: "again")], source: .wayland, uid: 0
            )
            #expect(try mail.state == .inactive)
            fixture.manager.screenLockChanged(locked: false)
            #expect(try await Self.sent(mail, atLeast: 3) == ["didBecomeActive", "w didBecomeActive", "protectedDataDidBecomeAvailable"])
            #expect(try mail.state == .active)
        }
    }

    @Test func withLockInterruptsOffTheLockOnlyTellsAppsOfTheirData() async throws {
        try await withManager(configuration: try configuration("[System]\nLockInterrupts=no\n")) { (fixture: ManagerFixture) async throws in
            let mail = try await InProcessLifecycleTests.opened(Self.mail, fixture)
            fixture.manager.screenLockChanged(locked: true)
            let locked = try await mail.replies(atLeast: 1).compactMap { $0["parameters"]?["callback"]?["kind"]?.stringValue }
            #expect(locked == ["lifecycle.protectedDataWillBecomeUnavailable"])
            #expect(try mail.state == .active)
        }
    }
}
