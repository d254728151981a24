/// Why an app is in its state and what it waits for, each thing in the product's words: what `coalescectl explain`
/// says. Decided from the app's lifecycle and what the shell knows of it besides; values only.
public struct AppExplanation: Sendable, Hashable {
    /// One thing that keeps the app where it is, or decides where it goes next.
    public enum Reason: Sendable, Hashable {
        /// Not running; these kinds launch it into the background when posted (their background modes).
        case notRunning(launchedBy: [String])
        /// Its windows keep it on screen: how many are focused and how many shown.
        case onScreen(focused: Int, shown: Int)
        /// In the foreground with no window reported: a launch or an operator put it there.
        case foreground
        /// Inactive for these interruptions: active again when the last ends.
        case interrupted([String])
        /// In the background, waiting for its didEnterBackground to be acknowledged, within `left`.
        case didEnterBackgroundUnacknowledged(left: Duration?)
        /// Background tasks open, by name, with the budget left.
        case tasksOpen([String], left: Duration?)
        /// Background modes: never suspended.
        case backgroundModes([String])
        /// Woken for its events: `unacknowledged` events and callbacks still to acknowledge, with the budget left.
        case woken(unacknowledged: Int, left: Duration?)
        /// Suspended: runs no code; its process held so (`nil`: told, and trusted, cooperative).
        case suspended(ProcessHold?)
        /// Events held for it: how many posts, of which kinds.
        case holds(posts: Int, kinds: [String])
        /// What wakes it from suspension: posts of these kinds; otherwise only bringing it forward.
        case wakesOn([String])
        /// Its process outlived a restart of the daemon and has not attached again.
        case notAttached(pid: Int32)
        /// Its last launches ended before it finished launching: the daemon launches it no more by itself.
        case launchesHeld(failed: Int)
        /// One of its scheduled background refreshes: when it runs, what it waits for, or how long its run has left.
        case refresh(RefreshFact)

        /// A name for the reason, for scripts.
        public var code: String {
            switch self {
            case .notRunning: "notRunning"
            case .onScreen: "onScreen"
            case .foreground: "foreground"
            case .interrupted: "interrupted"
            case .didEnterBackgroundUnacknowledged: "didEnterBackgroundUnacknowledged"
            case .tasksOpen: "tasksOpen"
            case .backgroundModes: "backgroundModes"
            case .woken: "woken"
            case .suspended: "suspended"
            case .holds: "holds"
            case .wakesOn: "wakesOn"
            case .notAttached: "notAttached"
            case .launchesHeld: "launchesHeld"
            case .refresh: "refresh"
            }
        }

        /// The reason as a person reads it.
        public var text: String {
            switch self {
            case .notRunning(let kinds):
                let launch = "It is not running: it runs when it is launched (Launch) or its process attaches"
                return kinds.isEmpty ? launch + "." : launch + ", or when a post of \(Self.list(kinds)) launches it into the background."
            case .onScreen(let focused, let shown):
                let count = focused + shown
                return "\(count) of its windows \(count == 1 ? "is" : "are") on screen (\(focused) focused): the session keeps it in the foreground until none is."
            case .foreground:
                return "It was brought to the foreground (a launch, Activate) and stays there until it is sent home (Deactivate) or another app takes the foreground."
            case .interrupted(let causes):
                return "It is interrupted (\(causes.joined(separator: ", "))): it is active again when \(causes.count == 1 ? "that ends" : "they end")."
            case .didEnterBackgroundUnacknowledged(let left):
                return "It has not acknowledged didEnterBackground: it is suspended once it does"
                    + (left.map { " (and killed if it has not within \(Self.seconds($0)))" } ?? "") + "."
            case .tasksOpen(let names, let left):
                return "Background tasks are open (\(names.map { $0.isEmpty ? "unnamed" : $0 }.joined(separator: ", "))): it is suspended when they end"
                    + (left.map { " or its background time runs out in \(Self.seconds($0))" } ?? "") + "."
            case .backgroundModes(let modes):
                return "It declares background modes (\(modes.joined(separator: ", "))): it is never suspended."
            case .woken(let unacknowledged, let left):
                return "It was woken into the background for its events: it is suspended again once it has acknowledged "
                    + (unacknowledged == 0 ? "them" : "the \(unacknowledged) it has not yet") + " and closed its tasks"
                    + (left.map { ", or when its background time runs out in \(Self.seconds($0))" } ?? "") + "."
            case .suspended(let hold):
                let how = switch hold {
                case .stopped?: " and stopped (SIGSTOP)"
                case .frozen?: " and its unit frozen"
                case nil: ""
                }
                return "It is suspended\(how): it runs no code."
            case .holds(let posts, let kinds):
                return "It holds \(posts) \(posts == 1 ? "post" : "posts") of \(Self.list(kinds)), delivered coalesced when it runs again."
            case .wakesOn(let kinds):
                if kinds.isEmpty {
                    return "Nothing posted to it wakes it: it runs again when it is activated (Activate, or one of its windows focused)."
                }
                return "A post of \(Self.list(kinds)) wakes it into the background; otherwise it runs again when it is activated."
            case .notAttached(let pid):
                return "Its process (pid \(pid)) outlived a restart of the daemon and has not attached again."
            case .refresh(let refresh):
                if let left = refresh.runLeft {
                    return "Its refresh \(refresh.id) runs, with \(Self.seconds(left)) of its budget left."
                }
                let when = refresh.dueIn > .zero ? "in \(Self.seconds(refresh.dueIn))" : "now"
                let failures = refresh.failures > 0 ? " after \(refresh.failures) failed \(refresh.failures == 1 ? "run" : "runs") (a backoff)" : ""
                guard refresh.unmet.isEmpty else {
                    return "Its refresh \(refresh.id) is due \(when)\(failures) and waits for \(Self.list(refresh.unmet)) to hold."
                }
                return "Its refresh \(refresh.id) is due \(when)\(failures), and runs by \(Self.seconds(refresh.dueIn + refresh.flex)) from now, "
                    + "with other apps' refreshes due then."
            case .launchesHeld(let failed):
                return "Its last \(failed) launches ended before it finished launching (it crashed, or did not acknowledge "
                    + "didFinishLaunching in time): events, answers and URLs do not launch it until an operator launches it."
            }
        }

        private static func list(_ names: [String]) -> String {
            names.count <= 1 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names.last!
        }

        private static func seconds(_ duration: Duration) -> String {
            let (seconds, attoseconds) = duration.components
            let value = Double(seconds) + Double(attoseconds) / 1e18
            return value.rounded() == value ? "\(Int64(value)) s" : "\((value * 10).rounded() / 10) s"
        }
    }

    public var state: AppState
    public var reasons: [Reason]

    /// Posts held of one kind.
    public struct HeldKind: Sendable, Hashable {
        public var kind: String
        public var posts: Int
        public init(kind: String, posts: Int) {
            self.kind = kind
            self.posts = posts
        }
    }

    /// One scheduled refresh, as the shell sees it now.
    public struct RefreshFact: Sendable, Hashable {
        public var id: String
        /// How long until its window opens (zero or less: open).
        public var dueIn: Duration
        public var flex: Duration
        public var failures: Int
        /// The conditions it requires that do not hold.
        public var unmet: [String]
        /// While it runs: what is left of its budget.
        public var runLeft: Duration?

        public init(id: String, dueIn: Duration, flex: Duration, failures: Int, unmet: [String], runLeft: Duration?) {
            self.id = id
            self.dueIn = dueIn
            self.flex = flex
            self.failures = failures
            self.unmet = unmet
            self.runLeft = runLeft
        }
    }

    /// What the shell knows of the app besides its lifecycle.
    public struct Facts: Sendable, Hashable {
        /// Its scheduled background refreshes.
        public var refreshes: [RefreshFact] = []
        /// Its windows on screen, as its scenes say.
        public var focusedScenes = 0
        public var shownScenes = 0
        public var interruptions: [String] = []
        /// Held posts by kind, in the order they are held.
        public var held: [HeldKind] = []
        /// Kinds declared to wake it from suspension, and kinds that launch it (mapped to a background mode).
        public var wakingKinds: [String] = []
        public var launchingKinds: [String] = []
        /// How its process is held while suspended.
        public var hold: ProcessHold?
        /// A process that runs it but has not attached (after a restart of the daemon).
        public var unattachedPid: Int32?
        public init() {}
    }
}

extension AppLifecycle {
    /// Why the app is in its state now, and what it waits for: the reasons in the order they matter.
    public func explanation(_ facts: AppExplanation.Facts, now: Instant) -> AppExplanation {
        var reasons: [AppExplanation.Reason] = []
        let left = self.backgroundTimeRemaining(now: now)
        switch self.state {
        case .notRunning:
            reasons.append(.notRunning(launchedBy: facts.launchingKinds))
            if self.launchesHeld { reasons.append(.launchesHeld(failed: self.failedLaunches.inARow)) }
        case .active, .inactive:
            if facts.focusedScenes + facts.shownScenes > 0 {
                reasons.append(.onScreen(focused: facts.focusedScenes, shown: facts.shownScenes))
            } else {
                reasons.append(.foreground)
            }
            if self.state == .inactive, !facts.interruptions.isEmpty { reasons.append(.interrupted(facts.interruptions)) }
        case .background:
            if !self.traits.backgroundModes.isEmpty { reasons.append(.backgroundModes(self.traits.backgroundModes.sorted())) }
            if self.woken {
                // What the wake sent (events and callbacks, numbered from the app's one counter) and the app has not
                // acknowledged yet.
                let from = max(self.acknowledgedUpTo + 1, self.wokenAtSequence)
                reasons.append(.woken(unacknowledged: Int(clamping: self.nextSequence > from ? self.nextSequence - from : 0), left: left))
            }
            if let awaited = self.unacknowledgedDidEnterBackground {
                reasons.append(.didEnterBackgroundUnacknowledged(left: awaited.deadline.map { max(.zero, now.duration(to: $0)) }))
            }
            if !self.tasks.isEmpty {
                reasons.append(.tasksOpen(self.tasks.sorted { $0.key < $1.key }.map(\.value), left: left))
            }
        case .suspended:
            reasons.append(.suspended(facts.hold))
            if !facts.held.isEmpty {
                reasons.append(.holds(posts: facts.held.reduce(0) { $0 + $1.posts }, kinds: facts.held.map(\.kind)))
            }
            reasons.append(.wakesOn(facts.wakingKinds))
        }
        if let pid = facts.unattachedPid, self.state.isRunning { reasons.append(.notAttached(pid: pid)) }
        reasons += facts.refreshes.map { .refresh($0) }
        return AppExplanation(state: self.state, reasons: reasons)
    }
}
