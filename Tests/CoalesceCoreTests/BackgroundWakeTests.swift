import CoalesceCore
import Testing

/// A suspended app woken into the background for its events (`wakes: background`), on time that moves only when the
/// test says so: no callback brings it forward, and it goes back to suspended once its work is acknowledged, or
/// when its budget runs out.
@Suite struct BackgroundWakeTests {
    let t0 = TestInstant.zero

    func at(_ seconds: Double) -> TestInstant { self.t0.advanced(by: .milliseconds(Int64(seconds * 1000))) }

    /// An app launched, sent home and suspended at `at(10)`, with everything it was sent acknowledged.
    func suspended(timings: LifecycleTimings = LifecycleTimings()) throws -> Lifecycle {
        var app = Lifecycle(timings: timings)
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        let home = try app.deactivate(now: self.at(10))
        let suspended = app.acknowledge(upTo: home.lastSequence!, now: self.at(10))
        #expect(suspended == [.transition(from: .background, to: .suspended, reason: .backgroundWorkDone)])
        return app
    }

    @Test func aWakeMovesTheAppToTheBackgroundWithoutACallback() throws {
        var app = try self.suspended()
        let woken = try app.wakeIntoBackground(now: self.at(20))
        #expect(woken == [.transition(from: .suspended, to: .background, reason: .eventWake)])
        #expect(app.woken && app.receivesAtOnce)
        #expect(app.backgroundTimeRemaining(now: self.at(20)) == .seconds(30))
        #expect(app.nextDeadline == self.at(45), "the warning before the budget's end")
    }

    @Test func onlyASuspendedAppIsWoken() throws {
        var app = Lifecycle()
        #expect(throws: LifecycleError.notSuspended(.notRunning)) { try app.wakeIntoBackground(now: self.t0) }
        _ = try app.launch(.foreground, now: self.t0)
        #expect(throws: LifecycleError.notSuspended(.active)) { try app.wakeIntoBackground(now: self.t0) }
    }

    /// The events the wake sends are numbered from the app's counter: acknowledging all of them (and no task open)
    /// is the work done.
    @Test func theAppIsSuspendedAgainOnceEverythingItWasSentIsAcknowledged() throws {
        var app = try self.suspended()
        _ = try app.wakeIntoBackground(now: self.at(20))
        let first = app.reserveSequence()
        let second = app.reserveSequence()
        #expect(app.acknowledge(upTo: first, now: self.at(21)) == [], "one event is still not handled")
        #expect(app.state == .background)
        let done = app.acknowledge(upTo: second, now: self.at(22))
        #expect(done == [.transition(from: .background, to: .suspended, reason: .backgroundWorkDone)])
        #expect(!app.woken && app.nextDeadline == nil)
    }

    @Test func anOpenTaskKeepsTheWokenAppRunningUntilItEnds() throws {
        var app = try self.suspended()
        _ = try app.wakeIntoBackground(now: self.at(20))
        let event = app.reserveSequence()
        let task = try app.beginBackgroundTask(name: "fetch", now: self.at(20))
        #expect(task.remaining == .seconds(30))
        #expect(app.acknowledge(upTo: event, now: self.at(21)) == [])
        let ended = try app.endBackgroundTask(task.id, now: self.at(22))
        #expect(ended == [.transition(from: .background, to: .suspended, reason: .backgroundWorkDone)])
    }

    /// A woken app that never acknowledges is warned once for the wake itself (no task names it), then suspended.
    @Test func aWakeWhoseWorkIsNeverAcknowledgedIsWarnedThenSuspended() throws {
        var app = try self.suspended()
        _ = try app.wakeIntoBackground(now: self.at(20))
        _ = app.reserveSequence()
        #expect(app.timePassed(now: self.at(44.9)) == [])
        let warned = app.timePassed(now: self.at(45))
        #expect(warned.callbacks == [.backgroundTaskWillExpire])
        #expect(warned == [.deliver(.backgroundTaskWillExpire, sequence: warned.lastSequence!, task: nil)], "no task named")
        #expect(app.timePassed(now: self.at(46)) == [], "warned once")
        let expired = app.timePassed(now: self.at(50))
        #expect(expired == [.transition(from: .background, to: .suspended, reason: .backgroundTasksExpired)])
        #expect(!app.woken && app.nextDeadline == nil)
    }

    @Test func aWokenAppBroughtForwardIsNoLongerOnItsWakesBudget() throws {
        var app = try self.suspended()
        _ = try app.wakeIntoBackground(now: self.at(20))
        let forward = try app.activate(now: self.at(21))
        #expect(forward.callbacks == [.willEnterForeground, .didBecomeActive])
        #expect(!app.woken)
        #expect(app.nextDeadline == nil)
        #expect(app.timePassed(now: self.at(100)) == [])
        #expect(app.state == .active)
    }

    /// With no budget (`BackgroundTaskBudgetSec=infinity`) a wake lasts until its work is acknowledged.
    @Test func withoutABudgetOnlyTheAcknowledgementEndsTheWake() throws {
        var timings = LifecycleTimings()
        timings.backgroundTaskBudget = nil
        var app = try self.suspended(timings: timings)
        _ = try app.wakeIntoBackground(now: self.at(20))
        let event = app.reserveSequence()
        #expect(app.nextDeadline == nil)
        #expect(app.timePassed(now: self.at(1e6)) == [])
        #expect(app.acknowledge(upTo: event, now: self.at(1e6)).last == .transition(from: .background, to: .suspended, reason: .backgroundWorkDone))
    }
}
