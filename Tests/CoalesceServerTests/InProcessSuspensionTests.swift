@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Real suspension (DESIGN.md §5) on the manager in process: an app's ``FakeProcess`` keeps the signals the manager
/// sent it, so that whether a suspended app was stopped is read from them and from how the manager says it holds the
/// app (`suspendedAs`), on the manual clock. A stopped app across a restart is in ``InProcessRestartTests``; the
/// kernel's own account of a stopped process (/proc/PID/stat) is tested end to end, in `ProcessTests`.
@Suite struct InProcessSuspensionTests {
    static let mail = "org.example.mail"

    /// An app is not stopped while an event it was sent is unacknowledged: one that hangs in an event's handler
    /// in the background and is then suspended (its background task ended) is left running.
    @Test func anAppThatHasNotAcknowledgedWhatItWasSentIsNotStopped() async throws {
        try await withManager(configuration: try configuration("[Apps]\nSuspensionDelaySec=100ms\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: Self.mail)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            // As the example app with --task-on-background sync --end-task-after 1 --stall-on-event mail.ping: its
            // didEnterBackground begins a task and is acknowledged; the event is read and never acknowledged.
            let task = try fixture.manager.beginBackgroundTask(name: Self.mail, uid: 0, taskName: "sync")
            try app.acknowledge()
            #expect(try await fixture.post(Self.mail, "mail.ping", [:]) == true)
            #expect(try await app.kinds() == ["mail.ping"])
            await fixture.clock.advance(to: .seconds(1))
            try fixture.manager.endBackgroundTask(name: Self.mail, uid: 0, id: task.id)
            #expect(try app.state == .suspended)
            // Ten times SuspensionDelaySec=: an app with nothing unacknowledged would be stopped by now.
            for elapsed in [1100, 1500, 2000] {
                await fixture.clock.advance(to: .milliseconds(elapsed))
                #expect(app.process.signals.isEmpty && !app.process.isStopped, "after \(elapsed) ms")
                #expect(try app.snapshot.hold == nil, "after \(elapsed) ms")
                #expect(try app.state == .suspended)
            }
        }
    }
}
