@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import Synchronization
import Testing
import Varlink

/// Scheduled background refreshes on the manager in process, with a manual clock: a suspended app woken into the
/// background for its refresh at the end of its window, on the refresh's budget; a stopped one launched with the
/// refresh as its reason; conditions holding it back; a run that expires tried again after a backoff; the schedule
/// kept in the store.
@Suite struct InProcessRefreshTests {
    static let mail = "org.example.mail"
    let wall0 = ManualClock.wallStart

    static func scheduler(_ fixture: ManagerFixture) throws -> RefreshScheduler {
        try RefreshScheduler(apps: fixture.manager, logger: Logger(label: "test", factory: { _ in fixture.logs }))
    }

    /// Registered, launched, sent home and suspended, everything acknowledged.
    static func suspendedApp(_ fixture: ManagerFixture) async throws -> TestApp {
        try await fixture.register(Self.mail)
        return try await fixture.attachSuspended(Self.mail)
    }

    @Test func aSuspendedAppIsWokenForItsRefreshAtItsWindowsEndOnItsBudgetAndItRunsAgainAPeriodLater() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let refreshes = try Self.scheduler(fixture)
            defer { refreshes.stop() }
            let app = try await Self.suspendedApp(fixture)
            let request = RefreshRequest(
                id: "sync", earliest: self.wall0 + 60, interval: .seconds(900), flex: .seconds(30), budget: .seconds(10)
            )
            let scheduled = try await refreshes.schedule(app: Self.mail, uid: 0, request: request, keep: false)
            #expect(scheduled.task.due == self.wall0 + 60)

            await fixture.clock.advance(by: .seconds(89))
            #expect(try app.state == .suspended, "not before its window's end")
            await fixture.clock.advance(by: .seconds(1))
            #expect(try await app.callbacks(atLeast: 1).map { $0["kind"] } == ["lifecycle.backgroundRefresh"], "no willEnterForeground")
            #expect(try app.state == .background)
            #expect(fixture.manager.state.withLock { $0.records[try! AppName(Self.mail)]?.reason } == .refresh)
            #expect(try fixture.manager.backgroundTimeRemaining(name: Self.mail, uid: 0) == .seconds(10), "the refresh's budget")
            let explained = try fixture.manager.explain(name: Self.mail, refreshes: refreshes.facts(of: AppName(Self.mail), wall: fixture.clock.wall))
            #expect(explained.explanation.reasons.contains { $0.code == "refresh" && $0.text.contains("runs, with 10 s") })

            try await refreshes.done(app: Self.mail, uid: 0, id: "sync", success: true)
            try app.acknowledge()
            try await waitUntil("the app to be suspended again") { try app.state == .suspended }
            let listed = try refreshes.list(app: Self.mail, uid: 0)
            #expect(listed.map(\.task.due) == [self.wall0 + 90 + 900] && listed.first?.task.lastOutcome == .done)
            await #expect(throws: AppError.refreshNotRunning(app: Self.mail, id: "sync")) {
                try await refreshes.done(app: Self.mail, uid: 0, id: "sync", success: true)
            }
        }
    }

    @Test func aRefreshWaitsForItsConditionsAndARunThatExpiresIsTriedAgainAfterABackoff() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let refreshes = try Self.scheduler(fixture)
            defer { refreshes.stop() }
            let app = try await Self.suspendedApp(fixture)
            refreshes.conditionsChanged(SystemConditions([.network: false]))
            _ = try await refreshes.schedule(
                app: Self.mail, uid: 0,
                request: RefreshRequest(id: "fetch", earliest: self.wall0, flex: .zero, requires: [.network], budget: .seconds(10)),
                keep: false
            )
            await fixture.clock.advance(by: .seconds(600))
            #expect(try app.state == .suspended, "offline: it waits")
            #expect(try refreshes.list(app: Self.mail, uid: 0).first?.unmet == [.network])
            let explained = try fixture.manager.explain(name: Self.mail, refreshes: refreshes.facts(of: AppName(Self.mail), wall: fixture.clock.wall))
            #expect(explained.explanation.reasons.contains { $0.code == "refresh" && $0.text.contains("waits for network") })

            refreshes.conditionsChanged(SystemConditions([.network: true]))
            #expect(try await app.callbacks(atLeast: 1).map { $0["kind"] } == ["lifecycle.backgroundRefresh"])
            // The app acknowledges the event but never says the run is done: its budget runs out.
            try app.acknowledge()
            await fixture.clock.advance(by: .seconds(10))
            let expired = try refreshes.list(app: Self.mail, uid: 0).first
            #expect(expired?.task.lastOutcome == .expired && expired?.task.failures == 1)
            #expect(expired?.task.due == self.wall0 + 610 + 30, "tried again 30 s later")
        }
    }

    @Test func aStoppedAppIsLaunchedIntoTheBackgroundWithItsRefreshAsTheReason() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let refreshes = try Self.scheduler(fixture)
            defer { refreshes.stop() }
            try await fixture.register(Self.mail)
            _ = try await refreshes.schedule(
                app: Self.mail, uid: 0, request: RefreshRequest(id: "sync", earliest: self.wall0, flex: .zero), keep: false
            )
            await fixture.clock.advance(by: .seconds(1))
            let appName = try AppName(Self.mail)
            try await waitUntil("the launch for the refresh") {
                fixture.manager.state.withLock { $0.records[appName]?.pendingLaunch != nil }
            }
            let app = try await fixture.attach(Self.mail)
            let sent = try await app.callbacks(atLeast: 4)
            #expect(sent.map { $0["kind"]?.stringValue ?? "?" } == [
                "lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didEnterBackground",
                "lifecycle.backgroundRefresh",
            ])
            #expect(sent.first?["launchOptions"]?["reason"] == "refresh" && sent.first?["launchOptions"]?["refresh"] == "sync")
            #expect(sent.last?["payload"]?["id"] == "sync")
        }
    }

    @Test func theScheduleIsKeptInTheStoreAndTheLimitsAreChecked() async throws {
        var configuration = Configuration()
        configuration.refresh.maxPerApp = 1
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            let refreshes = try Self.scheduler(fixture)
            try await fixture.register(Self.mail, uid: 1000)
            let request = RefreshRequest(
                id: "sync", earliest: self.wall0 + 3600, interval: .seconds(3600), requires: [.network, .idle], late: .skip
            )
            _ = try await refreshes.schedule(app: Self.mail, uid: 1000, request: request, keep: false)
            await #expect(throws: AppError.notOwner(app: Self.mail)) {
                try await refreshes.schedule(app: Self.mail, uid: 2000, request: request, keep: false)
            }
            await #expect(throws: AppError.tooManyRefreshes(app: Self.mail, limit: 1)) {
                try await refreshes.schedule(app: Self.mail, uid: 1000, request: RefreshRequest(id: "other", earliest: 0), keep: false)
            }
            await #expect(throws: AppError.self) {
                try await refreshes.schedule(
                    app: Self.mail, uid: 1000, request: RefreshRequest(id: "sync", earliest: 0, budget: .seconds(31)), keep: false
                )
            }
            let kept = try await refreshes.schedule(
                app: Self.mail, uid: 1000, request: RefreshRequest(id: "sync", earliest: 0), keep: true
            )
            #expect(kept.task.request == request, "keep leaves the scheduled one")
            refreshes.stop()

            // Another scheduler on the same store, as after a restart.
            let again = try Self.scheduler(fixture)
            defer { again.stop() }
            #expect(try again.list(app: Self.mail, uid: 1000).map(\.task.request) == [request])
            try await again.cancel(app: Self.mail, uid: 1000, id: "sync")
            await #expect(throws: AppError.noSuchRefresh(app: Self.mail, id: "sync")) {
                try await again.cancel(app: Self.mail, uid: 1000, id: "sync")
            }
        }
    }
}
