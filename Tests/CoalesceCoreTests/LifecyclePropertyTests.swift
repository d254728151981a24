import CoalesceCore
import Testing

/// Refused requests change nothing, and random request sequences keep the invariants seed 004 implies.
@Suite struct LifecyclePropertyTests {
    @Test func refusedRequestsLeaveTheAppAsItWas() throws {
        var app = Lifecycle()
        #expect(throws: LifecycleError.notRunning(.notRunning)) { try app.activate(now: .zero) }
        #expect(throws: LifecycleError.notSuspended(.notRunning)) { try app.purge(now: .zero) }
        _ = try app.launch(.foreground, now: .zero)
        let before = app.state
        #expect(throws: LifecycleError.alreadyRunning(.active)) { try app.launch(.background, now: .zero) }
        #expect(throws: LifecycleError.notSuspended(.active)) { try app.purge(now: .zero) }
        #expect(throws: LifecycleError.noSuchTask(42)) { try app.endBackgroundTask(42, now: .zero) }
        #expect(throws: LifecycleError.notInterrupted) { try app.interruptionEnded(now: .zero) }
        #expect(app.state == before)
        #expect(app.tasks.isEmpty)
    }

    /// SplitMix64: a small, seedable generator, so a failing sequence can be replayed from its seed.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            self.state &+= 0x9E37_79B9_7F4A_7C15
            var z = self.state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    enum Request: CaseIterable {
        case launchForeground, launchBackground, activate, deactivate, interruptionBegan, interruptionEnded
        case terminate, purge, processExited, acknowledge, beginTask, endTask, wait
        /// A post of a kind that wakes the app; an event sent to an app that receives.
        case wake, event
    }

    @Test(arguments: 0..<200)
    func randomSequencesKeepTheInvariants(seed: UInt64) {
        var random = SeededGenerator(state: seed)
        var traits = AppTraits()
        traits.exitsOnSuspend = seed % 7 == 0
        if seed % 5 == 0 { traits.backgroundModes = ["audio"] }
        var app = Lifecycle(traits: traits)
        var now = TestInstant.zero
        var tracked = AppState.notRunning
        var lastSequence: UInt64 = 0
        var lastDelivered: UInt64 = 0
        /// A willResignActive waits for didBecomeActive or didEnterBackground.
        var resignPending = false
        var history: [String] = []

        for step in 0..<60 {
            let request = Request.allCases.randomElement(using: &random)!
            now = now.advanced(by: .milliseconds(Int64.random(in: 0...4000, using: &random)))
            history.append("\(request)")
            var effects: [LifecycleEffect] = []
            let wasWoken = app.woken
            do {
                switch request {
                case .launchForeground: effects = try app.launch(.foreground, now: now)
                case .launchBackground: effects = try app.launch(.background, now: now)
                case .activate: effects = try app.activate(now: now)
                case .deactivate: effects = try app.deactivate(now: now)
                case .interruptionBegan: effects = try app.interruptionBegan(now: now)
                case .interruptionEnded: effects = try app.interruptionEnded(now: now)
                case .terminate: effects = try app.terminate(now: now)
                case .purge: effects = try app.purge(now: now)
                case .processExited: effects = app.processExited(now: now)
                case .acknowledge: effects = app.acknowledge(upTo: lastDelivered, now: now)
                case .beginTask: _ = try app.beginBackgroundTask(name: "t\(step)", now: now)
                case .endTask:
                    if let id = app.tasks.keys.randomElement(using: &random) {
                        effects = try app.endBackgroundTask(id, now: now)
                    }
                case .wait: effects = app.timePassed(now: now)
                case .wake:
                    effects = try app.wakeIntoBackground(now: now)
                    #expect(effects == [.transition(from: .suspended, to: .background, reason: .eventWake)], "a wake sends no callback; seed \(seed)")
                case .event:
                    if app.receivesAtOnce {
                        lastDelivered = app.reserveSequence()
                        lastSequence = lastDelivered
                    }
                }
            } catch {
                #expect(app.state == tracked, "a refused request changed the state; seed \(seed): \(history)")
                continue
            }
            for effect in effects {
                switch effect {
                case .transition(let from, let to, let reason):
                    #expect(from == tracked, "transition from \(from) while \(tracked); seed \(seed): \(history)")
                    if wasWoken, to == .suspended, reason == .backgroundWorkDone {
                        #expect(app.acknowledgedUpTo + 1 >= app.nextSequence, "a wake ended with its events unacknowledged; seed \(seed): \(history)")
                    }
                    tracked = to
                    if to == .notRunning { resignPending = false }
                case .deliver(let callback, let sequence, _):
                    #expect(
                        tracked != .suspended && tracked != .notRunning,
                        "\(callback) delivered while \(tracked); seed \(seed): \(history)"
                    )
                    #expect(sequence > lastSequence, "sequence numbers must grow; seed \(seed)")
                    lastSequence = sequence
                    lastDelivered = sequence
                    switch callback {
                    case .willResignActive:
                        #expect(!resignPending, "willResignActive twice; seed \(seed): \(history)")
                        resignPending = true
                    case .didBecomeActive, .didEnterBackground:
                        resignPending = false
                    case .willEnterForeground:
                        #expect(!resignPending, "willEnterForeground after willResignActive; seed \(seed): \(history)")
                    default:
                        break
                    }
                case .kill, .terminate:
                    break
                case .launchesHeld(let failed):
                    #expect(app.launchesHeld && failed == app.timings.failedLaunchLimit, "held at \(failed); seed \(seed): \(history)")
                }
            }
            #expect(app.state == tracked, "state \(app.state) but transitions say \(tracked); seed \(seed): \(history)")
            #expect(!app.woken || app.state == .background, "woken while \(app.state); seed \(seed): \(history)")
            if app.state == .suspended {
                #expect(app.tasks.isEmpty && traits.backgroundModes.isEmpty, "suspended with work; seed \(seed)")
            }
        }
    }
}
