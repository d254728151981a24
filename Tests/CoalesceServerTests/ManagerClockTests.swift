@testable import CoalesceServer
import CoalesceCore
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The manager in process, without sockets, on a manual clock
/// (``withManager(configuration:directory:processes:units:logs:_:)``): a deadline of seconds passes when the test
/// moves time, not when it waits.
@Suite struct ManagerClockTests {
    static let mail = "org.example.mail"

    @Test func aLaunchNotAcknowledgedInTimeIsKilledWhenTheDeadlinePassesOnTheManualClock() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.kinds() == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            #expect(try app.state == .active)
            await fixture.clock.advance(by: .milliseconds(4_999))
            #expect(try app.state == .active, "its deadline has not passed")
            await fixture.clock.advance(by: .milliseconds(1))
            #expect(try app.state == .notRunning, "killed at its deadline")
            #expect(app.process.signals == [SIGKILL])
            let last = try await app.replies().last
            #expect(last?["parameters"]?["state"] == "notRunning", "its stream ended")
        }
    }

    @Test func aLaunchAcknowledgedInTimeKeepsRunningLongAfterTheDeadline() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            let callbacks = try await app.callbacks()
            let launch = try #require(callbacks.first { $0["kind"] == "lifecycle.didFinishLaunching" })
            let seq = try #require(launch["seq"]?.intValue)
            try app.acknowledge(upTo: UInt64(seq))
            await fixture.clock.advance(by: .seconds(3600))
            #expect(try app.state == .active)
            #expect(app.process.signals.isEmpty)
        }
    }

    /// `infinity` turns a deadline off: an app that never acknowledges its launch or its move to the background, and
    /// holds a background task, runs on through a year of the manual clock, told nothing of an expiry.
    @Test func infiniteDeadlinesAndBudgetNeverFireOnTheManualClock() async throws {
        let configuration = try Configuration.parse([
            ConfigurationSource(path: "coalesced.conf", text: "[Apps]\nAcknowledgeTimeoutSec=infinity\nBackgroundTaskBudgetSec=infinity\n")
        ])
        try await withManager(configuration: configuration) { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            let manager = fixture.manager
            #expect(try await app.kinds() == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            await fixture.clock.advance(by: .seconds(366 * 24 * 3600))
            #expect(try app.state == .active, "no deadline to acknowledge the launch by")
            let task = try manager.beginBackgroundTask(name: Self.mail, uid: 0, taskName: "upload")
            #expect(task.remaining == nil, "no budget")
            _ = try manager.deactivate(name: Self.mail)
            #expect(try await app.kinds() == ["lifecycle.willResignActive", "lifecycle.didEnterBackground"])
            await fixture.clock.advance(by: .seconds(366 * 24 * 3600))
            #expect(try app.state == .background, "neither killed nor suspended")
            #expect(try await app.kinds().isEmpty, "no backgroundTaskWillExpire")
            #expect(app.process.signals.isEmpty)
        }
    }
}
