import CoalesceCore
import Testing

/// Random interleavings of what the screen says of three windows, interruptions and saves: the app's presence is
/// always what its scenes say, every scene's callbacks follow seed 002's order, and each scene ends where the screen
/// put it.
@Suite struct ScenePropertyTests {
    enum Input: CaseIterable {
        case show, close, interruptionBegins, interruptionEnds, save, processEnds
    }

    /// The state a scene's callbacks say it is in: each callback allowed only from where UIKit sends it.
    static func replay(_ callback: SceneCallback, from state: SceneState) -> SceneState? {
        switch (callback, state) {
        case (.willConnect, .unattached): .background
        case (.willEnterForeground, .background): .foregroundInactive
        case (.didBecomeActive, .foregroundInactive): .foregroundActive
        case (.willResignActive, .foregroundActive): .foregroundInactive
        case (.didEnterBackground, .foregroundInactive): .background
        case (.didDisconnect, .background): .unattached
        default: nil
        }
    }

    /// Where the screen puts a scene, written apart from the machine.
    static func expected(_ presentation: ScenePresentation, interrupted: Bool) -> SceneState {
        switch presentation {
        case .focused: interrupted ? .foregroundInactive : .foregroundActive
        case .shown: .foregroundInactive
        case .hidden: .background
        }
    }

    @Test(arguments: 0..<300)
    func randomInterleavingsKeepTheScenesAndTheAppConsistent(seed: UInt64) throws {
        var random = LifecyclePropertyTests.SeededGenerator(state: seed)
        let ids = try ["a", "b", "c"].map(SceneID.init)
        var scenes = AppScenes()
        /// What the app's stream says of each scene, from its callbacks alone.
        var told: [SceneID: SceneState] = [:]
        /// What the screen last said of each window, and whether an interruption lasts.
        var screen: [SceneID: ScenePresentation] = [:]
        var interrupted = false
        var saved: [SceneID: String] = [:]
        var history: [String] = []
        /// Where the effects said the app is.
        var presence = ScenePresence.offScreen

        for step in 0..<80 {
            let input = Input.allCases.randomElement(using: &random)!
            let id = ids.randomElement(using: &random)!
            let effects: [SceneEffect]
            switch input {
            case .show:
                let presentation = ScenePresentation.allCases.randomElement(using: &random)!
                history.append("show \(id) \(presentation)")
                effects = scenes.show(id, as: presentation, source: .wayland)
                if presentation == .focused {
                    for other in screen.keys where other != id && screen[other] == .focused { screen[other] = .shown }
                }
                screen[id] = presentation
            case .close:
                history.append("close \(id)")
                effects = scenes.close(id)
                screen[id] = nil
            case .interruptionBegins, .interruptionEnds:
                interrupted = input == .interruptionBegins
                history.append("interruption \(interrupted)")
                effects = scenes.interruption(interrupted)
            case .save:
                history.append("save \(id)")
                scenes.save(id, state: "\(step)")
                saved[id] = "\(step)"
                effects = []
            case .processEnds:
                history.append("process ends")
                effects = scenes.processEnded()
                screen = [:]
            }
            let context = Comment(rawValue: "seed \(seed): \(history)")

            for effect in effects {
                switch effect {
                case .callback(let callback, let scene, let connection):
                    let next = Self.replay(callback, from: told[scene] ?? .unattached)
                    #expect(next != nil, "\(callback) from \(told[scene] ?? .unattached); \(context)")
                    told[scene] = next
                    if callback == .willConnect {
                        #expect(connection?.restoredState == saved[scene], context)
                    }
                case .transition(let scene, _, let to) where to == .unattached && input == .processEnds:
                    told[scene] = .unattached  // no one is there to be told
                case .transition:
                    break
                case .presence(let from, let to):
                    #expect(from == presence && from != to, "presence \(from) → \(to) after \(presence); \(context)")
                    presence = to
                }
            }
            #expect(presence == scenes.presence, "the presence the effects told is not the scenes'; \(context)")
            // Each transition's `from` is where the scene was: the transitions of one scene chain.
            var at: [SceneID: SceneState] = [:]
            for case .transition(let scene, let from, let to) in effects {
                if let last = at[scene] { #expect(from == last, context) }
                at[scene] = to
            }

            for id in ids {
                let state = scenes.scenes[id]?.state ?? .unattached
                #expect(state == (told[id] ?? .unattached), "the stream and the scene differ for \(id); \(context)")
                let wanted = screen[id].map { Self.expected($0, interrupted: interrupted) } ?? .unattached
                #expect(state == wanted, "\(id) is not where the screen put it; \(context)")
            }
            let states = ids.map { scenes.scenes[$0]?.state ?? .unattached }
            let presence: ScenePresence =
                states.contains(.foregroundActive) ? .active : states.contains(.foregroundInactive) ? .inactive : .offScreen
            #expect(scenes.presence == presence, context)
            #expect(states.filter { $0 == .foregroundActive }.count <= 1, context)
            if interrupted { #expect(!states.contains(.foregroundActive), context) }
        }
    }
}
