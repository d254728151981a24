@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import Synchronization
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Suspension by systemd's cgroup freezer (`Suspension=freeze`, DESIGN.md §5) on the manager in process: the app's
/// launch unit is frozen and thawed through ``FakeUnits``, which answers as the test scripts it (a refusal, a
/// FreezeUnit or ThawUnit call that fails), and its process is a ``FakeProcess`` in that unit. What falls back to
/// SIGSTOP, what is asked again, and what a kill leaves are read from the unit calls, the signals the process was
/// sent and the manager's log. The real FreezeUnit and ThawUnit under systemd are tested in the sandbox
/// (`FreezeUnitTests`).
@Suite struct InProcessFreezeTests {
    static let mail = "org.example.mail"
    static let unit = "example-mail.service"

    /// The unit's and the process's story as calls: "freeze UNIT", "thaw UNIT", in order.
    static let freeze = "freeze \(Self.unit)"
    static let thaw = "thaw \(Self.unit)"

    /// Freezing after a delay of 100 ms.
    static func freezing() throws -> Configuration {
        try configuration("[Apps]\nSuspension=freeze\nSuspensionDelaySec=100ms\n")
    }

    /// Registers mail with its launch unit, attaches a process running in that unit, launched into the foreground,
    /// and sends it home until it is suspended, everything acknowledged.
    func suspendedApp(_ fixture: ManagerFixture) async throws -> TestApp {
        try await fixture.register(Self.mail, launchUnit: .set(Self.unit, byAdmin: true))
        let app = try await fixture.attach(Self.mail, process: fixture.processes.spawn(unit: Self.unit))
        let launched = try await app.sent().callbacks
        #expect(launched == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        try app.acknowledge()
        _ = try fixture.manager.deactivate(name: Self.mail)
        let home = try await app.sent().callbacks
        #expect(home == ["willResignActive", "didEnterBackground"])
        try app.acknowledge()
        #expect(try app.state == .suspended)
        return app
    }

    /// The messages the manager logged about mail's suspension (those with a `suspension` field), in order.
    static func suspensionLog(_ fixture: ManagerFixture) -> [String] {
        fixture.logs.entries.filter { $0.metadata["suspension"] != nil && $0.metadata["app"] == Self.mail }.map(\.message)
    }

    /// Suspended past the delay, frozen: waits until the FreezeUnit call was answered and said.
    func frozenApp(_ fixture: ManagerFixture) async throws -> TestApp {
        let app = try await self.suspendedApp(fixture)
        await fixture.clock.advance(by: .milliseconds(100))
        try await waitUntil("\(Self.unit) to be frozen (\(Self.suspensionLog(fixture)))") {
            Self.suspensionLog(fixture).contains { $0.hasPrefix("\(Self.mail): frozen (FreezeUnit \(Self.unit), ") }
        }
        #expect(fixture.units.calls == [Self.freeze])
        #expect(app.process.isFrozen && app.process.signals.isEmpty)
        #expect(try app.snapshot.hold == .frozen)
        return app
    }

    @Test func anAppInItsUnitIsFrozenWhileSuspendedAndThawedOnItsWake() async throws {
        try await withManager(configuration: try Self.freezing()) { (fixture: ManagerFixture) async throws in
            let app = try await self.frozenApp(fixture)
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent().callbacks
            #expect(woken == ["willEnterForeground", "didBecomeActive"])
            try await waitUntil("\(Self.unit) to be thawed (\(Self.suspensionLog(fixture)))") {
                Self.suspensionLog(fixture).contains { $0.hasPrefix("\(Self.mail): thawed (ThawUnit \(Self.unit), ") }
            }
            #expect(fixture.units.calls == [Self.freeze, Self.thaw])
            #expect(!app.process.isFrozen && app.process.signals.isEmpty, "thawed, never signalled")
            #expect(try app.snapshot.hold == nil)
        }
    }

    /// How systemd declines to freeze the unit: refused before FreezeUnit is asked, or FreezeUnit failing.
    struct Decline: Sendable, CustomTestStringConvertible {
        var refusal: String?
        var failures: Int
        /// The unit calls made.
        var calls: [String]
        var testDescription: String { self.refusal == nil ? "FreezeUnit fails" : "refused" }
    }

    static let declines = [
        Decline(refusal: "example-mail.service has WatchdogSec= set", failures: 0, calls: []),
        Decline(refusal: nil, failures: 1, calls: ["freeze example-mail.service"]),
    ]

    /// systemd may refuse the freeze before it is asked (a unit with `WatchdogSec=` under systemd before 258), or
    /// FreezeUnit may fail: either way the app is held by SIGSTOP instead, the log says why, and its wake continues
    /// it with no ThawUnit.
    @Test(arguments: InProcessFreezeTests.declines)
    func aFreezeSystemdRefusesOrFailsFallsBackToSIGSTOPAndSaysSo(_ decline: Decline) async throws {
        let (refusal, calls) = (decline.refusal, decline.calls)
        let processes = FakeProcesses()
        var script = FakeUnits.Script(freezeFailures: decline.failures)
        script.refusals[Self.unit] = refusal
        let units = FakeUnits(script, processes: processes)
        try await withManager(configuration: try Self.freezing(), processes: processes, units: units) {
            (fixture: ManagerFixture) async throws in
            let app = try await self.suspendedApp(fixture)
            await fixture.clock.advance(by: .milliseconds(100))
            try await waitUntil("mail to be stopped instead (signals: \(app.process.signals))") {
                app.process.signals == [SIGSTOP]
            }
            #expect(fixture.units.calls == calls)
            #expect(app.process.isStopped && !app.process.isFrozen)
            #expect(try app.snapshot.hold == .stopped)
            let pid = app.process.pid
            let reason = refusal ?? "FreezeUnit failed: FreezeUnit \(Self.unit) failed (scripted)"
            // Why first, then what was done: the journal reads in order.
            #expect(
                Self.suspensionLog(fixture) == [
                    "\(Self.mail): not frozen: \(reason); stopping pid \(pid) with SIGSTOP instead",
                    "\(Self.mail): stopped (SIGSTOP) while suspended",
                ]
            )
            let notice = fixture.logs.entries.first { $0.message.contains("not frozen") }
            #expect(notice?.level == .notice && notice?.metadata["unit"] == Self.unit)

            _ = try fixture.manager.activate(name: Self.mail)
            #expect(app.process.signals == [SIGSTOP, SIGCONT])
            let woken = try await app.sent().callbacks
            #expect(woken == ["willEnterForeground", "didBecomeActive"])
            #expect(fixture.units.calls == calls, "nothing to thaw")
            #expect(try app.snapshot.hold == nil)
        }
    }

    /// A ThawUnit that fails on the wake is said once, as an error naming what continues the app by hand, and asked
    /// again a second later, and again, until it is thawed; the wake's callbacks go out meanwhile (they wait in the
    /// app's socket until it runs).
    @Test func aThawThatFailsIsAskedAgainEverySecondUntilItIsThawed() async throws {
        try await withManager(configuration: try Self.freezing()) { (fixture: ManagerFixture) async throws in
            let app = try await self.frozenApp(fixture)
            fixture.units.script.withLock { $0.thawFailures = 2 }
            _ = try fixture.manager.activate(name: Self.mail)
            let woken = try await app.sent().callbacks
            #expect(woken == ["willEnterForeground", "didBecomeActive"])
            let cannot = "\(Self.mail): cannot thaw \(Self.unit): ThawUnit \(Self.unit) failed (scripted); asking again every second (`systemctl thaw \(Self.unit)` continues it)"
            try await waitUntil("the failed thaw to be said (\(Self.suspensionLog(fixture)))") {
                Self.suspensionLog(fixture).contains(cannot)
            }
            #expect(fixture.units.calls == [Self.freeze, Self.thaw])
            #expect(app.process.isFrozen)
            let error = fixture.logs.entries.first { $0.message == cannot }
            #expect(error?.level == .error && error?.metadata["suspension"] == "thawFailed")

            // Not before the second is up.
            await fixture.clock.advance(by: .milliseconds(999))
            #expect(fixture.units.calls == [Self.freeze, Self.thaw])
            await fixture.clock.advance(by: .milliseconds(1))
            try await waitUntil("ThawUnit to be asked again (\(fixture.units.calls))") {
                fixture.units.calls.count == 3
            }
            // The second failure is answered a moment later, and its retry armed then: time moves a tenth of a
            // second at a time until the third call.
            try await waitUntil("ThawUnit to be asked a third time (\(fixture.units.calls))") { () async -> Bool in
                await fixture.clock.advance(by: .milliseconds(100))
                return fixture.units.calls.count == 4
            }
            try await waitUntil("\(Self.unit) to be thawed (\(Self.suspensionLog(fixture)))") {
                Self.suspensionLog(fixture).contains { $0.hasPrefix("\(Self.mail): thawed (ThawUnit \(Self.unit), ") }
            }
            #expect(fixture.units.calls == [Self.freeze, Self.thaw, Self.thaw, Self.thaw])
            #expect(!app.process.isFrozen && app.process.signals.isEmpty)
            #expect(Self.suspensionLog(fixture).filter { $0.contains("cannot thaw") }.count == 1, "said once")
            // Thawed: nothing more is asked, however long it runs.
            await fixture.clock.advance(by: .seconds(5))
            #expect(fixture.units.calls.count == 4)
            #expect(try app.state == .active)
        }
    }

    /// A purge kills a frozen app as it is (SIGKILL works on frozen tasks), sends it nothing else, and then thaws
    /// its unit, so that systemd does not keep an empty frozen unit.
    @Test func aFrozenAppThatIsPurgedIsKilledAsItIsAndItsUnitThawed() async throws {
        try await withManager(configuration: try Self.freezing()) { (fixture: ManagerFixture) async throws in
            let app = try await self.frozenApp(fixture)
            let purged = try fixture.manager.purge(name: Self.mail, count: 1)
            #expect(purged.map(\.value) == [Self.mail])
            #expect(app.process.signals == [SIGKILL] && !app.process.isAlive)
            try await waitUntil("\(Self.unit) to be thawed after the kill (\(fixture.units.calls))") {
                fixture.units.calls == [Self.freeze, Self.thaw]
            }
            // FakeUnits thaws only the processes alive in the unit: this one stayed frozen, so the thaw came after
            // the kill.
            #expect(app.process.condition.withLock { $0.frozen }, "the thaw came after the kill")
            #expect(try fixture.manager.get(Self.mail).state == .notRunning)
            let sent = try await app.sent()
            #expect(sent == TestApp.Sent(), "a purge sends no callback")
            await fixture.clock.advance(by: .seconds(5))
            #expect(app.process.signals == [SIGKILL] && app.process.signalsAfterExit.isEmpty, "nothing sent after the kill")
            #expect(fixture.units.calls == [Self.freeze, Self.thaw])
        }
    }

    /// A purge kills a stopped app as it is, SIGKILL working on a stopped process: it is not continued first, and
    /// nothing is sent to it after.
    @Test func aStoppedAppThatIsPurgedIsKilledAsItIsAndNeverContinued() async throws {
        try await withManager(configuration: try configuration("[Apps]\nSuspension=stop\nSuspensionDelaySec=100ms\n")) {
            (fixture: ManagerFixture) async throws in
            let app = try await self.suspendedApp(fixture)
            await fixture.clock.advance(by: .milliseconds(100))
            #expect(app.process.signals == [SIGSTOP])
            _ = try fixture.manager.purge(name: Self.mail, count: 1)
            #expect(app.process.signals == [SIGSTOP, SIGKILL] && !app.process.isAlive)
            #expect(try fixture.manager.get(Self.mail).state == .notRunning)
            await fixture.clock.advance(by: .seconds(5))
            #expect(app.process.signals == [SIGSTOP, SIGKILL], "not continued before the kill")
            #expect(app.process.signalsAfterExit.isEmpty, "nor continued after it")
            #expect(fixture.units.calls.isEmpty)
            #expect(!Self.suspensionLog(fixture).contains { $0.contains("continued") })
        }
    }
}
