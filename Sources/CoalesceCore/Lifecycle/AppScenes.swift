/// An app's scenes (seed 002): each window of the app a scene with its own state, driven by what the screen says of
/// it, and the app's place on the screen derived from them (``presence``), which its ``AppLifecycle`` follows.
///
/// Each input returns the effects in order, each transition followed by the callback that tells it (as
/// ``AppLifecycle``'s do): a scene moving from one state to another goes
/// through the states between, each step with its callback, as UIKit's scenes do (background → foregroundInactive is
/// willEnterForeground, foregroundInactive → foregroundActive is didBecomeActive, and back by willResignActive and
/// didEnterBackground). A new scene is told willConnect before anything else; a closed one goes to the background
/// first and is then told didDisconnect. At most one scene is foreground active: a scene that takes the focus makes
/// the one that had it resign first. While an interruption lasts (a lock, an alert) no scene is active: the focused
/// one is foreground inactive until it ends.
///
/// Where the app goes follows as ``SceneEffect/presence(from:to:)`` among the effects, placed so that the app enters the
/// foreground before its scene does and leaves it after its last scene has.
///
/// What the app saves for a scene (``save(_:state:)``) outlives its disconnection and comes back with willConnect
/// when the same scene connects again.
public struct AppScenes: Sendable, Hashable {
    /// The connected scenes, by id.
    public private(set) var scenes: [SceneID: Scene] = [:]
    /// What the app saved for each scene, connected or not.
    public private(set) var saved: [SceneID: String] = [:]
    /// An interruption lasts: no scene is active.
    public private(set) var interrupted = false

    /// How many scenes' saved states are kept: the oldest saved goes first past it.
    public static let savedStatesKept = 64
    /// Saved states in the order they were saved, for ``savedStatesKept``.
    private var savedOrder: [SceneID] = []

    public init() {}

    /// Where the scenes put the app.
    public var presence: ScenePresence {
        var presence = ScenePresence.offScreen
        for scene in self.scenes.values {
            switch scene.state {
            case .foregroundActive: return .active
            case .foregroundInactive: presence = .inactive
            case .background, .unattached: break
            }
        }
        return presence
    }

    /// The scene focused on screen, if any (active, or inactive while an interruption lasts).
    public var focused: SceneID? {
        self.scenes.values.first { $0.presentation == .focused }?.id
    }

    // MARK: Inputs

    /// The screen shows the scene's window as `presentation` (connecting the scene if it is new). A window focused
    /// takes the focus from any other of the app's: that one is shown without it, and resigns first.
    public mutating func show(
        _ id: SceneID,
        as presentation: ScenePresentation,
        source: SceneSource,
        title: String = ""
    ) -> [SceneEffect] {
        var effects: [SceneEffect] = []
        if presentation == .focused {
            for other in self.scenes.keys.sorted() where other != id && self.scenes[other]!.presentation == .focused {
                self.scenes[other]!.presentation = .shown
                self.move(other, to: self.target(of: self.scenes[other]!), into: &effects)
            }
        }
        if self.scenes[id] == nil {
            // Connected, off screen: where a scene the system asks for goes (seed 002), and where one on screen
            // comes from.
            self.scenes[id] = Scene(id: id, state: .background, presentation: presentation, source: source, title: title)
            effects.append(.transition(scene: id, from: .unattached, to: .background))
            effects.append(.callback(.willConnect, scene: id, connection: SceneConnection(source: source, restoredState: self.saved[id], title: title)))
        }
        self.scenes[id]!.presentation = presentation
        if !title.isEmpty { self.scenes[id]!.title = title }
        self.move(id, to: self.target(of: self.scenes[id]!), into: &effects)
        return effects
    }

    /// The window's title changed: nothing the app is told.
    public mutating func retitle(_ id: SceneID, _ title: String) {
        self.scenes[id]?.title = title
    }

    /// The scene's window closed: the scene goes to the background, is told didDisconnect, and is unattached. A
    /// scene that is not connected: nothing.
    public mutating func close(_ id: SceneID) -> [SceneEffect] {
        guard self.scenes[id] != nil else { return [] }
        var effects: [SceneEffect] = []
        self.move(id, to: .background, into: &effects)
        self.step(id, to: .unattached, by: .didDisconnect, into: &effects)
        self.scenes[id] = nil
        return effects
    }

    /// The app's process is gone: its scenes are unattached without a word (no one is there to hear it). What it
    /// saved for them stays, for the scenes of its next launch.
    public mutating func processEnded() -> [SceneEffect] {
        let before = self.presence
        var effects: [SceneEffect] = []
        for id in self.scenes.keys.sorted() {
            effects.append(.transition(scene: id, from: self.scenes[id]!.state, to: .unattached))
        }
        self.scenes = [:]
        if before != .offScreen { effects.append(.presence(from: before, to: .offScreen)) }
        return effects
    }

    /// An interruption begins (`true`: the screen locked, an alert shown) or ends: while it lasts the focused scene
    /// is foreground inactive (willResignActive), and it is active again after (didBecomeActive). Saying again
    /// what already holds changes nothing.
    public mutating func interruption(_ lasting: Bool) -> [SceneEffect] {
        guard lasting != self.interrupted else { return [] }
        self.interrupted = lasting
        var effects: [SceneEffect] = []
        if let focused = self.focused { self.move(focused, to: self.target(of: self.scenes[focused]!), into: &effects) }
        return effects
    }

    /// `effects` (of one report's inputs, in order) with the app's presence settled: moves of the app that follow
    /// each other with nothing between become one, and one that comes back where it started is none. The focus moving
    /// from one of the app's windows to another leaves the app active: its scenes are told, and it is not.
    public static func settled(_ effects: [SceneEffect]) -> [SceneEffect] {
        var result: [SceneEffect] = []
        for effect in effects {
            guard case .presence(_, let to) = effect, case .presence(let earlier, _)? = result.last else {
                result.append(effect)
                continue
            }
            result.removeLast()
            if earlier != to { result.append(.presence(from: earlier, to: to)) }
        }
        return result
    }

    /// The app saves what it needs to restore the scene (`nil`: forgets it); it comes back with willConnect when the
    /// same scene connects again. Returns the scene whose saved state this one pushed out (past
    /// ``savedStatesKept``), if any.
    @discardableResult
    public mutating func save(_ id: SceneID, state: String?) -> SceneID? {
        self.savedOrder.removeAll { $0 == id }
        guard let state else {
            self.saved[id] = nil
            return nil
        }
        self.saved[id] = state
        self.savedOrder.append(id)
        guard self.savedOrder.count > Self.savedStatesKept else { return nil }
        let forgotten = self.savedOrder.removeFirst()
        self.saved[forgotten] = nil
        return forgotten
    }

    // MARK: Moving a scene

    /// The state the screen asks of the scene now.
    private func target(of scene: Scene) -> SceneState {
        switch scene.presentation {
        case .focused: self.interrupted ? .foregroundInactive : .foregroundActive
        case .shown: .foregroundInactive
        case .hidden: .background
        }
    }

    /// Moves a connected scene to `target` through the states between, one callback a step.
    private mutating func move(_ id: SceneID, to target: SceneState, into effects: inout [SceneEffect]) {
        while let state = self.scenes[id]?.state, state != target {
            switch (state, target) {
            case (.background, _): self.step(id, to: .foregroundInactive, by: .willEnterForeground, into: &effects)
            case (.foregroundInactive, .foregroundActive): self.step(id, to: .foregroundActive, by: .didBecomeActive, into: &effects)
            case (.foregroundInactive, _): self.step(id, to: .background, by: .didEnterBackground, into: &effects)
            case (.foregroundActive, _): self.step(id, to: .foregroundInactive, by: .willResignActive, into: &effects)
            case (.unattached, _): return  // connects only through show(_:as:source:title:)
            }
        }
    }

    private mutating func step(_ id: SceneID, to next: SceneState, by callback: SceneCallback, into effects: inout [SceneEffect]) {
        let before = self.presence
        let from = self.scenes[id]!.state
        self.scenes[id]!.state = next
        let after = self.presence
        if after > before { effects.append(.presence(from: before, to: after)) }
        effects.append(.transition(scene: id, from: from, to: next))
        effects.append(.callback(callback, scene: id))
        if after < before { effects.append(.presence(from: before, to: after)) }
    }
}
