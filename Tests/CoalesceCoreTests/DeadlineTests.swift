import CoalesceCore
import Testing

/// Deadlines and the background budget, on time that moves only when the test says so.
@Suite struct DeadlineTests {
    let t0 = TestInstant.zero

    func at(_ seconds: Double) -> TestInstant { self.t0.advanced(by: .milliseconds(Int64(seconds * 1000))) }

    @Test func aLaunchNeverAcknowledgedGetsTheAppKilled() throws {
        var app = Lifecycle()
        _ = try app.launch(.foreground, now: self.t0)
        #expect(app.nextDeadline == self.at(5))
        #expect(app.timePassed(now: self.at(4.999)) == [])
        #expect(
            app.timePassed(now: self.at(5))
                == [
                    .kill(reason: .launchNotAcknowledged),
                    .transition(from: .active, to: .notRunning, reason: .launchNotAcknowledged),
                ]
        )
        #expect(app.nextDeadline == nil)
    }

    /// `nil` timings (`infinity`): no acknowledgement deadline and no budget, so nothing ever comes due.
    @Test func infiniteTimingsSetNoDeadline() throws {
        var timings = LifecycleTimings()
        timings.launchAcknowledgement = nil
        timings.backgroundAcknowledgement = nil
        timings.backgroundTaskBudget = nil
        var app = Lifecycle(timings: timings)
        _ = try app.launch(.foreground, now: self.t0)
        #expect(app.nextDeadline == nil)
        let task = try app.beginBackgroundTask(name: "upload", now: self.t0)
        #expect(task.remaining == nil)
        _ = try app.deactivate(now: self.at(10))
        #expect(app.state == .background)
        #expect(app.nextDeadline == nil)
        #expect(app.backgroundTimeRemaining(now: self.at(20)) == nil)
        #expect(app.timePassed(now: self.at(1e9)) == [])
        #expect(app.state == .background, "neither killed nor suspended")
        _ = try app.endBackgroundTask(task.id, now: self.at(1e9))
        #expect(app.state == .background, "didEnterBackground is still not acknowledged")
    }

    @Test func onlyNumbersTheAppWasSentCanBeAcknowledged() throws {
        var app = Lifecycle(firstSequence: 10)
        let last = try app.launch(.foreground, now: self.t0).lastSequence!
        try app.checkAcknowledgement(upTo: last)
        try app.checkAcknowledgement(upTo: 3)  // an earlier run's number, from a process that outlived it
        let first = Lifecycle(firstSequence: 10, earliestSequence: 5)
        #expect(throws: LifecycleError.notSent(4, next: 10), "before the first run") { try first.checkAcknowledgement(upTo: 4) }
        #expect(throws: LifecycleError.notSent(last + 1, next: last + 1)) { try app.checkAcknowledgement(upTo: last + 1) }
        #expect(throws: LifecycleError.notSent(1 << 40, next: last + 1)) { try app.checkAcknowledgement(upTo: 1 << 40) }
    }

    @Test func anAcknowledgedLaunchMeetsItsDeadline() throws {
        var app = Lifecycle()
        let effects = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: effects.lastSequence!, now: self.at(4.9))
        #expect(app.nextDeadline == nil)
        #expect(app.timePassed(now: self.at(60)) == [])
        #expect(app.state == .active)
    }

    @Test func didEnterBackgroundNotAcknowledgedGetsTheAppKilled() throws {
        var app = Lifecycle()
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        _ = try app.deactivate(now: self.at(10))
        #expect(app.timePassed(now: self.at(15)).first == .kill(reason: .backgroundNotAcknowledged))
        #expect(app.state == .notRunning)
    }

    @Test func aTaskNeverEndedIsWarnedThenTheAppIsSuspended() throws {
        var app = Lifecycle()
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        let first = try app.beginBackgroundTask(name: "upload", now: self.t0)
        let second = try app.beginBackgroundTask(name: "sync", now: self.t0)
        #expect(first.remaining == .seconds(30), "in the foreground the whole budget remains")
        let home = try app.deactivate(now: self.at(100))
        _ = app.acknowledge(upTo: home.lastSequence!, now: self.at(100))
        #expect(app.state == .background, "open tasks keep it running")
        #expect(app.backgroundTimeRemaining(now: self.at(110)) == .seconds(20))
        #expect(app.nextDeadline == self.at(125))

        let warned = app.timePassed(now: self.at(125))
        #expect(warned.callbacks == [.backgroundTaskWillExpire, .backgroundTaskWillExpire])
        let tasks = warned.compactMap { if case .deliver(_, _, let task) = $0 { task } else { nil } }
        #expect(tasks == [first.id, second.id])
        #expect(app.timePassed(now: self.at(126)) == [], "each task is warned once")

        let expired = app.timePassed(now: self.at(130))
        #expect(expired == [.transition(from: .background, to: .suspended, reason: .backgroundTasksExpired)])
        #expect(app.tasks.isEmpty)
    }

    @Test func aBudgetThatRunsOutCanTerminateInstead() throws {
        var timings = LifecycleTimings()
        timings.terminateWhenBudgetRunsOut = true
        var app = Lifecycle(timings: timings)
        let launched = try app.launch(.background, now: self.t0)
        _ = try app.beginBackgroundTask(name: "upload", now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        let expired = app.timePassed(now: self.at(30))
        #expect(expired.callbacks == [.backgroundTaskWillExpire, .willTerminate])
        #expect(expired.contains(.terminate(reason: .backgroundTasksExpired)))
        #expect(app.state == .notRunning)
    }

    @Test func endingTheLastTaskInTheBackgroundSuspends() throws {
        var app = Lifecycle()
        let launched = try app.launch(.background, now: self.t0)
        let task = try app.beginBackgroundTask(name: "fetch", now: self.at(1))
        #expect(task.remaining == .seconds(29))
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.at(1))
        #expect(app.state == .background)
        #expect(try app.endBackgroundTask(task.id, now: self.at(2)).states == [.background, .suspended])
    }

    @Test func anAppHoldsABoundedNumberOfTasks() throws {
        var app = Lifecycle()
        _ = try app.launch(.foreground, now: .zero)
        for index in 0..<Lifecycle.maximumTasks { _ = try app.beginBackgroundTask(name: "t\(index)", now: .zero) }
        #expect(throws: LifecycleError.tooManyTasks(limit: 64)) { try app.beginBackgroundTask(name: "one more", now: .zero) }
        #expect(app.tasks.count == 64)
    }
}
