@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Apps whose processes outlive a restart of the daemon, in process: a manager stopped and a new one started on the
/// same state directory and ``FakeProcesses`` (``withManager(configuration:directory:processes:units:logs:_:)``
/// called again), with a ``FakeProcess`` that runs on in between and attaches again, or does not. What a restart
/// costs apps whose real processes reconnect through the client library is tested end to end, in `ProcessTests`.
@Suite struct InProcessRestartTests {
    static let mail = "org.example.mail"

    /// A first start in which `process` attaches as mail, is launched into the foreground and acknowledges it; the
    /// daemon then stops and leaves it running.
    static func launched(
        _ process: FakeProcess, configuration: Configuration, directory: TemporaryDirectory, processes: FakeProcesses
    ) async throws {
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail, process: process)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
        }
    }

    static func logged(_ fixture: ManagerFixture, _ message: String) -> Bool {
        fixture.logs.entries.contains { $0.message == message }
    }

    /// A process that outlived the daemon but never attaches again stops counting as the app after
    /// `LaunchTimeoutSec=`; one attaching in its place is launched.
    @Test func aProcessThatDoesNotAttachAgainAfterARestartNoLongerCountsAsTheApp() async throws {
        let (directory, processes) = (try TemporaryDirectory(), FakeProcesses())
        let process = processes.spawn()
        try await Self.launched(process, configuration: try configuration(noDeadlines), directory: directory, processes: processes)
        let configuration = try configuration(noDeadlines + "LaunchTimeoutSec=3s\n")
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            #expect(
                Self.logged(
                    fixture, "org.example.mail: active as before the restart, waiting for pid \(process.pid) to attach again"
                ),
                "\(fixture.logs.entries.map(\.message))"
            )
            await fixture.clock.advance(to: .milliseconds(2999))
            #expect(try fixture.manager.get(Self.mail).state == .active)
            await fixture.clock.advance(to: .seconds(3))
            #expect(try fixture.manager.get(Self.mail).state == .notRunning)
            #expect(
                Self.logged(fixture, "org.example.mail: pid \(process.pid) did not attach again within 3.0 s of the restart"),
                "\(fixture.logs.entries.map(\.message))"
            )
            let relaunched = try await fixture.attach(Self.mail)
            #expect(try await relaunched.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        }
        #expect(process.signals.isEmpty, "the process that did not attach again was left alone")
    }

    /// What happens to an app while its process has not attached again after a restart (here the home button)
    /// changes its state at once, and its callbacks reach the process when it attaches, after the first reply.
    @Test func callbacksOfAChangeBeforeTheProcessAttachesAgainReachItWhenItDoes() async throws {
        let (directory, processes) = (try TemporaryDirectory(), FakeProcesses())
        let process = processes.spawn()
        let configuration = try configuration(noDeadlines)
        try await Self.launched(process, configuration: configuration, directory: directory, processes: processes)
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            #expect(try fixture.manager.deactivate(name: Self.mail).state == .background)
            let again = try await fixture.attach(Self.mail, process: process)
            let replies = try await again.replies(atLeast: 3)
            #expect(replies.first?["parameters"]?["state"] == "background")
            let callbacks = replies.dropFirst().compactMap { $0["parameters"]?["callback"] }
            #expect(callbacks.map { $0["kind"] } == ["lifecycle.willResignActive", "lifecycle.didEnterBackground"])
            try again.acknowledge(upTo: UInt64(callbacks.last?["seq"]?.intValue ?? 0))
            #expect(try again.state == .suspended)
        }
    }

    /// A daemon stopped while an app is stopped (SIGSTOP) leaves it stopped; the next start takes it up suspended
    /// and stopped, does not give up on it for not attaching again (it cannot), and continues it when it is woken:
    /// its process then attaches again and hears the wake's callbacks, with no launch.
    @Test func aStoppedAppOutlivesARestartOfTheDaemonAndIsContinuedOnItsWake() async throws {
        let (directory, processes) = (try TemporaryDirectory(), FakeProcesses())
        let process = processes.spawn()
        try await withManager(
            configuration: try configuration("[Apps]\nSuspensionDelaySec=100ms\n"), directory: directory,
            processes: processes
        ) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail, process: process)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: nil)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            try app.acknowledge()
            #expect(try app.state == .suspended)
            await fixture.clock.advance(by: .milliseconds(100))
            #expect(process.signals == [SIGSTOP] && process.isStopped)
            #expect(try app.snapshot.hold == .stopped)
        }
        let configuration = try configuration("[Apps]\nSuspensionDelaySec=100ms\nLaunchTimeoutSec=1s\n")
        try await withManager(configuration: configuration, directory: directory, processes: processes) {
            (fixture: ManagerFixture) async throws in
            #expect(process.isStopped)
            let taken = try fixture.manager.get(Self.mail)
            #expect(taken.state == .suspended)
            #expect(taken.hold == .stopped)
            #expect(!taken.attached)
            // Twice LaunchTimeoutSec=: an app whose process could attach and did not would be given up by now.
            for elapsed in [500, 1000, 1500, 2000] {
                await fixture.clock.advance(to: .milliseconds(elapsed))
                let snapshot = try fixture.manager.get(Self.mail)
                #expect(snapshot.state == .suspended && snapshot.hold == .stopped, "after \(elapsed) ms")
            }
            _ = try fixture.manager.activate(name: Self.mail)
            #expect(process.signals == [SIGSTOP, SIGCONT], "continued on its wake")
            #expect(!process.isStopped)
            let again = try await fixture.attach(Self.mail, process: process)
            let replies = try await again.replies(atLeast: 3)
            let callbacks = replies.dropFirst().compactMap { $0["parameters"]?["callback"]?["kind"] }
            #expect(callbacks == ["lifecycle.willEnterForeground", "lifecycle.didBecomeActive"], "no launch")
            try again.acknowledge()
            #expect(try again.snapshot.attached)
            #expect(try again.state == .active)
            #expect(
                Self.logged(
                    fixture,
                    "org.example.mail: pid \(process.pid) is stopped as the daemon's last run left it; held until the app is woken"
                ),
                "\(fixture.logs.entries.map(\.message))"
            )
            #expect(!fixture.logs.entries.contains { $0.message.contains("did not attach again") })
        }
    }
}
