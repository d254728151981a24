import CoalesceCore
import Testing

/// Every row of DESIGN.md §1's transition table, with seed 004's callback orders.
@Suite struct TransitionTableTests {
    let t0 = TestInstant.zero

    /// An app launched to the foreground and active.
    func activeApp(_ traits: AppTraits = AppTraits()) throws -> Lifecycle {
        var app = Lifecycle(traits: traits)
        let effects = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: effects.lastSequence!, now: self.t0)
        return app
    }

    /// An app sent home and suspended.
    func suspendedApp() throws -> Lifecycle {
        var app = try self.activeApp()
        let effects = try app.deactivate(now: self.t0)
        _ = app.acknowledge(upTo: effects.lastSequence!, now: self.t0)
        #expect(app.state == .suspended)
        return app
    }

    @Test func launchToForeground() throws {
        var app = Lifecycle()
        let effects = try app.launch(.foreground, now: self.t0)
        #expect(effects.callbacks == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(effects.states == [.notRunning, .inactive, .active])
    }

    @Test func launchToBackgroundThenSuspendedOnceNoTaskRemains() throws {
        var app = Lifecycle()
        let effects = try app.launch(.background, now: self.t0)
        #expect(effects.callbacks == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground])
        #expect(effects.states == [.notRunning, .inactive, .background])
        let acknowledged = app.acknowledge(upTo: effects.lastSequence!, now: self.t0)
        #expect(acknowledged.states == [.background, .suspended])
        #expect(acknowledged.callbacks == [])
    }

    @Test func homeButton() throws {
        var app = try self.activeApp()
        let effects = try app.deactivate(now: self.t0)
        #expect(effects.callbacks == [.willResignActive, .didEnterBackground])
        #expect(effects.states == [.active, .inactive, .background])
        #expect(app.acknowledge(upTo: effects.lastSequence!, now: self.t0).states == [.background, .suspended])
    }

    @Test func backToForegroundFromSuspended() throws {
        var app = try self.suspendedApp()
        let effects = try app.activate(now: self.t0)
        #expect(effects.callbacks == [.willEnterForeground, .didBecomeActive])
        #expect(effects.states == [.suspended, .inactive, .active])
    }

    @Test func fastAppSwitchBackBeforeSuspension() throws {
        var app = try self.activeApp()
        _ = try app.deactivate(now: self.t0)
        #expect(app.state == .background)
        let effects = try app.activate(now: self.t0)
        #expect(effects.callbacks == [.willEnterForeground, .didBecomeActive])
        #expect(effects.states == [.background, .inactive, .active])
        // The abandoned didEnterBackground deadline no longer applies.
        #expect(app.timePassed(now: self.t0.advanced(by: .seconds(60))) == [])
    }

    @Test func interruptionBeginsAndEnds() throws {
        var app = try self.activeApp()
        let began = try app.interruptionBegan(now: self.t0)
        #expect(began.callbacks == [.willResignActive])
        #expect(began.states == [.active, .inactive])
        let ended = try app.interruptionEnded(now: self.t0)
        #expect(ended.callbacks == [.didBecomeActive])
        #expect(ended.states == [.inactive, .active])
    }

    @Test func interruptionThenTheUserLeaves() throws {
        // Seed 004, 2D-b: the switcher came up (willResignActive), then another app was chosen.
        var app = try self.activeApp()
        _ = try app.interruptionBegan(now: self.t0)
        let effects = try app.deactivate(now: self.t0)
        #expect(effects.callbacks == [.didEnterBackground])
        #expect(effects.states == [.inactive, .background])
    }

    @Test func terminateARunningApp() throws {
        var app = try self.activeApp()
        let effects = try app.terminate(now: self.t0)
        #expect(effects.callbacks == [.willTerminate])
        #expect(effects.contains(.terminate(reason: .terminate)))
        #expect(effects.states == [.active, .notRunning])
    }

    @Test func exitsOnSuspendAppTerminatesInsteadOfSuspending() throws {
        var app = try self.activeApp(AppTraits(exitsOnSuspend: true))
        let effects = try app.deactivate(now: self.t0)
        #expect(effects.callbacks == [.willResignActive, .willTerminate])
        #expect(effects.states == [.active, .inactive, .notRunning])
        #expect(effects.contains(.terminate(reason: .exitsOnSuspend)))
    }

    @Test func purgeOfASuspendedAppSaysNothing() throws {
        var app = try self.suspendedApp()
        let effects = try app.purge(now: self.t0)
        #expect(effects.callbacks == [])
        #expect(effects == [.kill(reason: .purge), .transition(from: .suspended, to: .notRunning, reason: .purge)])
    }

    @Test func terminatingASuspendedAppKillsItWithoutACallback() throws {
        var app = try self.suspendedApp()
        let effects = try app.terminate(now: self.t0)
        #expect(effects.callbacks == [])
        #expect(effects.first == .kill(reason: .terminate))
    }

    @Test func relaunchAfterPurge() throws {
        var app = try self.suspendedApp()
        _ = try app.purge(now: self.t0)
        let effects = try app.launch(.foreground, now: self.t0)
        #expect(effects.callbacks == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(effects.states == [.notRunning, .inactive, .active])
    }

    @Test func anAppWithABackgroundModeIsNeverSuspended() throws {
        var app = try self.activeApp(AppTraits(backgroundModes: ["audio"]))
        let effects = try app.deactivate(now: self.t0)
        _ = app.acknowledge(upTo: effects.lastSequence!, now: self.t0)
        #expect(app.state == .background)
    }

    @Test func processExitIsTerminationWithoutACallback() throws {
        var app = try self.activeApp()
        #expect(app.processExited(now: self.t0) == [.transition(from: .active, to: .notRunning, reason: .processExited)])
        #expect(app.processExited(now: self.t0) == [])
    }

    /// A state an earlier run of the daemon recorded, taken up without a callback; what lived only in that run's
    /// memory (tasks) is gone, so a background app without a mode is suspended. The app goes on from there.
    @Test func aRecordedStateIsTakenUpWithoutCallbacks() throws {
        var active = Lifecycle()
        #expect(active.restore(.active, interrupted: false) == .active)
        let home = try active.deactivate(now: self.t0)
        #expect(home.callbacks == [.willResignActive, .didEnterBackground])

        var background = Lifecycle()
        #expect(background.restore(.background, interrupted: false) == .suspended)
        #expect(try background.activate(now: self.t0).callbacks == [.willEnterForeground, .didBecomeActive])

        var audio = Lifecycle(traits: AppTraits(backgroundModes: ["audio"]))
        #expect(audio.restore(.background, interrupted: false) == .background)

        var called = Lifecycle()
        #expect(called.restore(.inactive, interrupted: true) == .inactive)
        #expect(try called.interruptionEnded(now: self.t0).callbacks == [.didBecomeActive])

        var stopped = Lifecycle()
        #expect(stopped.restore(.notRunning, interrupted: false) == nil)
        #expect(stopped.state == .notRunning)
        var running = try self.activeApp()
        #expect(running.restore(.suspended, interrupted: false) == nil, "only a lifecycle that has not started takes one up")
        #expect(running.state == .active)
    }
}
