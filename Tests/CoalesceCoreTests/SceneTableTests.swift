import CoalesceCore
import Testing

extension [SceneEffect] {
    /// The callbacks, each with its scene: `"a willConnect"`.
    var told: [String] {
        self.compactMap { effect in
            if case .callback(let callback, let scene, _) = effect { return "\(scene) \(callback.rawValue)" }
            return nil
        }
    }

    /// The states one scene passes through, its first `from` included.
    func states(of scene: SceneID) -> [SceneState] {
        var states: [SceneState] = []
        for case .transition(let id, let from, let to) in self where id == scene {
            if states.isEmpty { states.append(from) }
            states.append(to)
        }
        return states
    }

    var connections: [SceneConnection] {
        self.compactMap { effect in
            if case .callback(.willConnect, _, let connection) = effect { return connection }
            return nil
        }
    }
}

/// Seed 002's scene transitions, one row each: what the screen says of a window, the callbacks its scene is told in
/// order, and where the app's scenes put the app.
@Suite struct SceneTableTests {
    let a = try! SceneID("a")
    let b = try! SceneID("b")

    @Test func aWindowFocusedConnectsItsSceneAndMakesItActive() {
        var scenes = AppScenes()
        let effects = scenes.show(self.a, as: .focused, source: .wayland, title: "Inbox")
        #expect(effects.told == ["a willConnect", "a willEnterForeground", "a didBecomeActive"])
        #expect(effects.states(of: self.a) == [.unattached, .background, .foregroundInactive, .foregroundActive])
        #expect(effects.connections == [SceneConnection(source: .wayland, title: "Inbox")], "with its title as it connects")
        #expect(scenes.presence == .active)
        #expect(scenes.scenes[self.a]?.title == "Inbox")
    }

    @Test func aWindowShownWithoutFocusIsInactive() {
        var scenes = AppScenes()
        let effects = scenes.show(self.a, as: .shown, source: .x11)
        #expect(effects.told == ["a willConnect", "a willEnterForeground"])
        #expect(scenes.presence == .inactive)
    }

    @Test func aWindowThatAppearsHiddenConnectsInTheBackground() {
        var scenes = AppScenes()
        let effects = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(effects.told == ["a willConnect"])
        #expect(effects.states(of: self.a) == [.unattached, .background])
        #expect(scenes.presence == .offScreen)
    }

    @Test func minimizingTheActiveWindowResignsThenEntersTheBackground() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        let effects = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(effects.told == ["a willResignActive", "a didEnterBackground"])
        #expect(scenes.presence == .offScreen)
    }

    @Test func restoringAMinimizedWindowEntersTheForegroundThenBecomesActive() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .hidden, source: .wayland)
        let effects = scenes.show(self.a, as: .focused, source: .wayland)
        #expect(effects.told == ["a willEnterForeground", "a didBecomeActive"])
    }

    @Test func losingTheFocusToAnotherAppsWindowResigns() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        let effects = scenes.show(self.a, as: .shown, source: .wayland)
        #expect(effects.told == ["a willResignActive"])
        #expect(scenes.presence == .inactive)
    }

    @Test func theFocusMovingBetweenTwoWindowsOfTheAppResignsTheFirstBeforeActivatingTheSecond() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        _ = scenes.show(self.b, as: .shown, source: .wayland)
        let effects = scenes.show(self.b, as: .focused, source: .wayland)
        #expect(effects.told == ["a willResignActive", "b didBecomeActive"])
        #expect(scenes.scenes[self.a]?.state == .foregroundInactive)
        #expect(scenes.scenes[self.b]?.state == .foregroundActive)
        #expect(scenes.presence == .active)
    }

    @Test func closingTheActiveWindowResignsEntersTheBackgroundAndDisconnects() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        let effects = scenes.close(self.a)
        #expect(effects.told == ["a willResignActive", "a didEnterBackground", "a didDisconnect"])
        #expect(effects.states(of: self.a).last == .unattached)
        #expect(scenes.scenes.isEmpty)
        #expect(scenes.presence == .offScreen)
    }

    @Test func closingAWindowInTheBackgroundOnlyDisconnects() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(scenes.close(self.a).told == ["a didDisconnect"])
    }

    @Test func closingAWindowThatIsNotConnectedTellsNothing() {
        var scenes = AppScenes()
        #expect(scenes.close(self.a).isEmpty)
    }

    @Test func aSceneConnectingAgainGetsBackWhatTheAppSavedForIt() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        scenes.save(self.a, state: "draft 3")
        _ = scenes.close(self.a)
        let effects = scenes.show(self.a, as: .focused, source: .wayland)
        #expect(effects.connections == [SceneConnection(source: .wayland, restoredState: "draft 3")])
        // Another scene gets nothing of it.
        #expect(scenes.show(self.b, as: .shown, source: .wayland).connections == [SceneConnection(source: .wayland)])
    }

    @Test func savingNothingForgetsTheSavedState() {
        var scenes = AppScenes()
        scenes.save(self.a, state: "draft")
        scenes.save(self.a, state: nil)
        #expect(scenes.show(self.a, as: .shown, source: .x11).connections == [SceneConnection(source: .x11)])
    }

    @Test func savedStatesAreKeptForABoundedNumberOfScenesTheOldestGoingFirst() throws {
        var scenes = AppScenes()
        for n in 0..<AppScenes.savedStatesKept { #expect(scenes.save(try SceneID("s\(n)"), state: "\(n)") == nil) }
        scenes.save(try SceneID("s1"), state: "saved again")
        #expect(scenes.save(try SceneID("s\(AppScenes.savedStatesKept)"), state: "last") == (try SceneID("s0")))
        #expect(scenes.saved.count == AppScenes.savedStatesKept)
        #expect(scenes.saved[try SceneID("s0")] == nil)
        #expect(scenes.saved[try SceneID("s\(AppScenes.savedStatesKept)")] == "last")
        #expect(scenes.saved[try SceneID("s1")] == "saved again", "a save again makes it the newest")
    }

    @Test func anInterruptionMakesTheFocusedSceneInactiveUntilItEnds() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        #expect(scenes.interruption(true).told == ["a willResignActive"])
        #expect(scenes.presence == .inactive)
        #expect(scenes.interruption(true).isEmpty)
        #expect(scenes.interruption(false).told == ["a didBecomeActive"])
        #expect(scenes.presence == .active)
    }

    @Test func aWindowFocusedDuringAnInterruptionBecomesActiveOnlyWhenItEnds() {
        var scenes = AppScenes()
        _ = scenes.interruption(true)
        #expect(scenes.show(self.a, as: .focused, source: .wayland).told == ["a willConnect", "a willEnterForeground"])
        #expect(scenes.presence == .inactive)
        #expect(scenes.interruption(false).told == ["a didBecomeActive"])
    }

    @Test func anInterruptionOfAnAppOffScreenTellsNothing() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(scenes.interruption(true).isEmpty)
        #expect(scenes.interruption(false).isEmpty)
    }

    @Test func theProcessEndingUnattachesEverySceneWithoutAWordAndKeepsWhatWasSaved() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        _ = scenes.show(self.b, as: .hidden, source: .wayland)
        scenes.save(self.b, state: "b's")
        let effects = scenes.processEnded()
        #expect(effects.told.isEmpty)
        #expect(effects == [
            .transition(scene: self.a, from: .foregroundActive, to: .unattached),
            .transition(scene: self.b, from: .background, to: .unattached),
            .presence(from: .active, to: .offScreen),
        ])
        #expect(scenes.scenes.isEmpty)
        #expect(scenes.show(self.b, as: .shown, source: .wayland).connections.first?.restoredState == "b's")
    }

    @Test func aTitleChangeTellsTheAppNothing() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .shown, source: .x11, title: "one")
        scenes.retitle(self.a, "two")
        #expect(scenes.scenes[self.a]?.title == "two")
        #expect(scenes.show(self.a, as: .shown, source: .x11).isEmpty)
        #expect(scenes.scenes[self.a]?.title == "two")
    }

    @Test(arguments: [
        ("", SceneIDError.empty),
        (String(repeating: "x", count: 256), .tooLong(256)),
        ("a\nb", .controlCharacter),
    ])
    func aSceneIDThatCannotBeOneSaysWhy(text: String, error: SceneIDError) {
        #expect(throws: error) { try SceneID(text) }
    }
}

/// One report's effects on an app, its presence settled: the focus moving between two of its windows leaves the
/// app where it was.
@Suite struct SettledPresenceTests {
    let a = try! SceneID("a")
    let b = try! SceneID("b")

    @Test func theFocusMovingBetweenTwoWindowsOfTheAppDoesNotMoveTheApp() {
        var scenes = AppScenes()
        _ = scenes.show(self.a, as: .focused, source: .wayland)
        _ = scenes.show(self.b, as: .shown, source: .wayland)
        let moved = scenes.show(self.a, as: .shown, source: .wayland) + scenes.show(self.b, as: .focused, source: .wayland)
        #expect(moved.contains(.presence(from: .active, to: .inactive)), "each input alone moves the app")
        let settled = AppScenes.settled(moved)
        #expect(settled.told == ["a willResignActive", "b didBecomeActive"])
        #expect(!settled.contains { if case .presence = $0 { true } else { false } })
    }

    @Test func movesWithNothingBetweenBecomeOneAndOthersStay() {
        let c = SceneEffect.callback(.didBecomeActive, scene: self.a)
        #expect(AppScenes.settled([.presence(from: .active, to: .inactive), .presence(from: .inactive, to: .offScreen)])
            == [.presence(from: .active, to: .offScreen)])
        #expect(AppScenes.settled([.presence(from: .offScreen, to: .inactive), c, .presence(from: .inactive, to: .active)])
            == [.presence(from: .offScreen, to: .inactive), c, .presence(from: .inactive, to: .active)])
    }
}
