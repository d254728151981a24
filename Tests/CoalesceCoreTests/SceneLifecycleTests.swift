import CoalesceCore
import Testing

/// An app's lifecycle following its scenes: the app-level callbacks and the scenes' in the order the app hears
/// them, the app entering the foreground before its scene and leaving it after its last scene.
@Suite struct SceneLifecycleTests {
    let t0 = TestInstant.zero
    let a = try! SceneID("a")
    let b = try! SceneID("b")

    /// What the app hears, in order, as the shell carries the scenes' effects out: each presence change fed to the
    /// lifecycle in its place. App-level callbacks read `"app didBecomeActive"`, the scenes' `"a didBecomeActive"`.
    static func heard(_ effects: [SceneEffect], _ app: inout Lifecycle, now: TestInstant) -> [String] {
        var heard: [String] = []
        for effect in effects {
            switch effect {
            case .presence(let from, let to):
                for case .deliver(let callback, _, _) in app.follow(to, from: from, now: now) { heard.append("app \(callback.rawValue)") }
            case .callback(let callback, let scene, _):
                heard.append("\(scene) \(callback.rawValue)")
            case .transition:
                break
            }
        }
        return heard
    }

    /// An app launched into the background and suspended, as one that shows no window yet.
    func suspendedApp() throws -> Lifecycle {
        var app = Lifecycle()
        let effects = try app.launch(.background, now: self.t0)
        _ = app.acknowledge(upTo: effects.lastSequence!, now: self.t0)
        #expect(app.state == .suspended)
        return app
    }

    @Test func aWindowFocusedBringsTheAppForwardBeforeItsScene() throws {
        var app = try self.suspendedApp()
        var scenes = AppScenes()
        let effects = scenes.show(self.a, as: .focused, source: .wayland)
        #expect(Self.heard(effects, &app, now: self.t0) == [
            "a willConnect", "app willEnterForeground", "a willEnterForeground", "app didBecomeActive", "a didBecomeActive",
        ])
        #expect(app.state == .active)
    }

    @Test func theLastWindowMinimizedSendsTheAppToTheBackgroundAfterItsScene() throws {
        var app = try self.suspendedApp()
        var scenes = AppScenes()
        _ = Self.heard(scenes.show(self.a, as: .focused, source: .wayland), &app, now: self.t0)
        let effects = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(Self.heard(effects, &app, now: self.t0) == [
            "a willResignActive", "app willResignActive", "a didEnterBackground", "app didEnterBackground",
        ])
        #expect(app.state == .background)
        #expect(app.acknowledge(upTo: app.nextSequence - 1, now: self.t0).states == [.background, .suspended])
    }

    @Test func aWindowMinimizedWhileAnotherIsShownKeepsTheAppOnScreen() throws {
        var app = try self.suspendedApp()
        var scenes = AppScenes()
        _ = Self.heard(scenes.show(self.a, as: .focused, source: .wayland), &app, now: self.t0)
        _ = Self.heard(scenes.show(self.b, as: .shown, source: .wayland), &app, now: self.t0)
        let effects = scenes.show(self.a, as: .hidden, source: .wayland)
        #expect(Self.heard(effects, &app, now: self.t0) == ["a willResignActive", "app willResignActive", "a didEnterBackground"])
        #expect(app.state == .inactive)
    }

    @Test func theFocusMovingBetweenTheAppsWindowsKeepsTheAppActive() throws {
        var app = try self.suspendedApp()
        var scenes = AppScenes()
        _ = Self.heard(scenes.show(self.a, as: .focused, source: .wayland), &app, now: self.t0)
        _ = Self.heard(scenes.show(self.b, as: .shown, source: .wayland), &app, now: self.t0)
        let effects = scenes.show(self.b, as: .focused, source: .wayland)
        // Between a's resignation and b's activation the app is briefly inactive, as UIKit's app is.
        #expect(Self.heard(effects, &app, now: self.t0) == [
            "a willResignActive", "app willResignActive", "app didBecomeActive", "b didBecomeActive",
        ])
        #expect(app.state == .active)
    }

    @Test func anInterruptionOfTheScenesMakesTheAppInactiveAfterItsSceneAndActiveBeforeIt() throws {
        var app = try self.suspendedApp()
        var scenes = AppScenes()
        _ = Self.heard(scenes.show(self.a, as: .focused, source: .wayland), &app, now: self.t0)
        #expect(Self.heard(scenes.interruption(true), &app, now: self.t0) == ["a willResignActive", "app willResignActive"])
        #expect(app.state == .inactive)
        // The focus moving meanwhile makes nothing active.
        #expect(Self.heard(scenes.show(self.b, as: .focused, source: .wayland), &app, now: self.t0) == [
            "b willConnect", "b willEnterForeground",
        ])
        #expect(Self.heard(scenes.interruption(false), &app, now: self.t0) == ["app didBecomeActive", "b didBecomeActive"])
        #expect(app.state == .active)
    }

    @Test func followingANotRunningAppDoesNothing() {
        var app = Lifecycle()
        #expect(app.follow(.active, from: .offScreen, now: self.t0).isEmpty)
        #expect(app.state == .notRunning)
    }

    @Test func anAppOpenedBeforeItHadAWindowStaysActiveAsItsFirstSceneComes() throws {
        var app = Lifecycle()
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        var scenes = AppScenes()
        #expect(Self.heard(scenes.show(self.a, as: .focused, source: .wayland), &app, now: self.t0) == [
            "a willConnect", "a willEnterForeground", "a didBecomeActive",
        ])
        #expect(app.state == .active)
        // A window that appears hidden does not take it off screen: its scenes never put it there.
        var hidden = AppScenes()
        var other = Lifecycle()
        _ = try other.launch(.foreground, now: self.t0)
        #expect(Self.heard(hidden.show(self.b, as: .hidden, source: .wayland), &other, now: self.t0) == ["b willConnect"])
        #expect(other.state == .active)
    }

    @Test func theReasonIsTheScenesUnlessTheCallerSaysOtherwise() throws {
        var app = try self.suspendedApp()
        let effects = app.follow(.active, from: .offScreen, now: self.t0)
        #expect(effects.contains(.transition(from: .suspended, to: .inactive, reason: .scenes)))
        let locked = app.follow(.inactive, from: .active, reason: .interruptionBegan, now: self.t0)
        #expect(locked.contains(.transition(from: .active, to: .inactive, reason: .interruptionBegan)))
    }
}

/// Random interleavings of windows, acknowledgements, time and interruptions on a running app: the app is always
/// where its scenes put it (the background giving way to suspension by the usual rules), the app-level callbacks
/// keep seed 004's order, and the app is on screen whenever one of its scenes is told it is.
@Suite struct SceneLifecyclePropertyTests {
    enum Input: CaseIterable {
        case show, close, acknowledge, wait, interruption
    }

    /// The app's state its callbacks say, written apart from the machine.
    static func replay(_ callback: LifecycleCallback, from state: AppState) -> AppState? {
        switch (callback, state) {
        case (.willEnterForeground, .background), (.willEnterForeground, .suspended): .inactive
        case (.didBecomeActive, .inactive): .active
        case (.willResignActive, .active): .inactive
        case (.didEnterBackground, .inactive): .background
        default: nil
        }
    }

    @Test(arguments: 0..<300)
    func theAppFollowsItsScenesInEveryInterleaving(seed: UInt64) throws {
        var random = LifecyclePropertyTests.SeededGenerator(state: seed)
        let ids = try ["a", "b", "c"].map(SceneID.init)
        var app = Lifecycle()
        var now = TestInstant.zero
        _ = try app.launch(.background, now: now)
        var scenes = AppScenes()
        /// What the app was told of itself and of each scene.
        var told = AppState.background
        var toldScenes: [SceneID: SceneState] = [:]
        var history: [String] = []

        for _ in 0..<80 {
            let input = Input.allCases.randomElement(using: &random)!
            let id = ids.randomElement(using: &random)!
            now = now.advanced(by: .milliseconds(Int64.random(in: 0...2000, using: &random)))
            var sceneEffects: [SceneEffect] = []
            var appEffects: [LifecycleEffect] = []
            switch input {
            case .show:
                let presentation = ScenePresentation.allCases.randomElement(using: &random)!
                history.append("show \(id) \(presentation)")
                sceneEffects = scenes.show(id, as: presentation, source: .x11)
            case .close:
                history.append("close \(id)")
                sceneEffects = scenes.close(id)
            case .acknowledge:
                history.append("acknowledge")
                appEffects = app.acknowledge(upTo: app.nextSequence - 1, now: now)
            case .wait:
                history.append("wait")
                appEffects = app.timePassed(now: now)
            case .interruption:
                let lasting = Bool.random(using: &random)
                history.append("interruption \(lasting)")
                sceneEffects = scenes.interruption(lasting)
            }
            let context = Comment(rawValue: "seed \(seed): \(history)")
            // The shell's order: each presence change fed to the lifecycle where it stands among the scenes' effects.
            for effect in sceneEffects {
                switch effect {
                case .presence(let from, let to):
                    for case .deliver(let callback, _, _) in app.follow(to, from: from, now: now) {
                        let next = Self.replay(callback, from: told)
                        #expect(next != nil, "app \(callback) when \(told); \(context)")
                        told = next ?? told
                    }
                case .callback(let callback, let scene, _):
                    let next = ScenePropertyTests.replay(callback, from: toldScenes[scene] ?? .unattached)
                    toldScenes[scene] = next
                    if next?.isForeground == true {
                        #expect(told.isForeground, "\(scene) \(callback) while the app is \(told); \(context)")
                    }
                    if next == .foregroundActive {
                        #expect(told == .active, "\(scene) \(callback) while the app is \(told); \(context)")
                    }
                case .transition:
                    break
                }
            }
            for case .deliver(let callback, _, _) in appEffects {
                if let next = Self.replay(callback, from: told) { told = next }
            }
            for case .transition(_, let to, _) in appEffects { told = to }
            if app.state == .notRunning { break }  // a deadline missed: the app is killed, as without scenes

            #expect(told == app.state, "the app's callbacks and its state differ; \(context)")
            switch scenes.presence {
            case .active:
                #expect(app.state == .active, context)
            case .inactive:
                #expect(app.state == .inactive, context)
            case .offScreen:
                #expect(app.state == .background || app.state == .suspended, context)
            }
        }
    }
}
