/// The presentation rate: how many notifications the apps of one user present per interval, and what becomes of
/// the rest.
///
/// Each user (the apps' owner) presents at most ``Bound/burst`` notifications per window of ``Bound/interval``; a
/// window opens with the first presentation after the last one ended. A presentation that finds its owner's
/// allowance used is held instead: folded into the held presentation of its thread (its app and `threadID`, or its
/// app alone for none), which shows the latest one's content and stands for the fires of every presentation folded
/// into it, as the scheduler coalesces missed fires (``AlertPresentation/count``, ``AlertPresentation/late``). When
/// the window ends, the held presentations are presented, oldest thread first, as the first ones of the next window:
/// the burst of them at most, the rest waiting for the window after. One user holds at most a burst of threads: a
/// presentation of a further thread is folded into its app's threadless one.
///
/// A stretch over the bound begins with the first presentation held and ends with a window that ends with nothing
/// held: ``admit(_:owner:now:)`` says when one begins and ``due(now:)`` when it ends, so that the shell says each
/// once. Pure: the caller passes the time (the boot-time clock) and carries out what it returns.
public struct PresentationRate: Sendable {
    /// How many presentations per how long.
    public struct Bound: Sendable, Hashable {
        /// Presentations per window, at least 1.
        public var burst: Int
        /// A window's length, more than zero.
        public var interval: Duration

        public init(burst: Int, interval: Duration) {
            self.burst = max(1, burst)
            self.interval = max(interval, .nanoseconds(1))
        }
    }

    /// Where held presentations coalesce: an app's thread, or the app alone.
    public struct Thread: Sendable, Hashable {
        public var app: AppName
        public var thread: String?

        public init(app: AppName, thread: String?) {
            self.app = app
            self.thread = thread
        }
    }

    /// A thread's held presentation.
    public struct Held: Sendable, Hashable {
        public var thread: Thread
        /// The latest presentation folded in, standing for the fires of all of them (its
        /// ``AlertPresentation/folded`` counts those of the others), late when one of them was.
        public var presentation: AlertPresentation
        /// How many presentations were folded into it.
        public var presentations: Int
    }

    /// What becomes of one presentation.
    public enum Decision: Sendable, Hashable {
        /// Within its owner's allowance: present it now.
        case present
        /// Past it: folded into its thread's held presentation, which is now `held`. `newThread`: the thread held
        /// nothing before (a presentation to make); otherwise `held` replaces what the thread held. `passed`: it
        /// begins its owner's stretch over the bound.
        case hold(Held, newThread: Bool, passed: Bool)
    }

    /// What the end of a window comes to, in order.
    public enum Action: Sendable, Hashable {
        /// Present a held presentation now.
        case present(Held)
        /// The owner's stretch over the bound ended: `held` presentations were folded into `presented` ones.
        case ended(owner: UInt32, held: Int, presented: Int)
    }

    /// Since a stretch over the bound began: presentations held, and held presentations presented.
    private struct Stretch: Sendable {
        var held = 0
        var presented = 0
    }

    /// One owner's current window.
    private struct Window: Sendable {
        /// When it opened.
        var start: BootTime
        /// Presentations it made, the held ones presented when it opened among them.
        var presented = 0
        /// Held presentations by thread, each with the order its thread was first held in.
        var held: [Thread: (order: Int, held: Held)] = [:]
        /// The order the next thread held takes.
        var nextOrder = 0
        /// `nil`: its owner is within the bound.
        var stretch: Stretch?
    }

    /// Read at each input: a bound changed by a reload applies from the next one.
    public var bound: Bound
    private var windows: [UInt32: Window] = [:]

    public init(bound: Bound) {
        self.bound = bound
    }

    /// Takes one presentation of an app of `owner`'s: presented now, or held.
    public mutating func admit(_ presentation: AlertPresentation, owner: UInt32, now: BootTime) -> Decision {
        var window = self.windows[owner] ?? Window(start: now)
        if window.held.isEmpty, window.start.advanced(by: self.bound.interval) <= now {
            // Ended with nothing held: a new window opens. A stretch goes on until a window ends so, which ``due(now:)``
            // says.
            window = Window(start: now, stretch: window.stretch)
        }
        // Nothing overtakes what is held: held presentations use the next window's allowance first.
        if window.held.isEmpty, window.presented < self.bound.burst {
            window.presented += 1
            self.windows[owner] = window
            return .present
        }
        let passed = window.stretch == nil
        window.stretch = window.stretch ?? Stretch()
        window.stretch!.held += 1
        var thread = Thread(app: presentation.app, thread: presentation.content.threadID)
        if window.held[thread] == nil, window.held.count >= self.bound.burst { thread.thread = nil }
        let held: Held
        let earlier = window.held[thread]
        if let earlier {
            var folded = presentation
            folded.folded += earlier.held.presentation.count
            folded.late = folded.late || earlier.held.presentation.late
            held = Held(thread: thread, presentation: folded, presentations: earlier.held.presentations + 1)
            window.held[thread] = (earlier.order, held)
        } else {
            held = Held(thread: thread, presentation: presentation, presentations: 1)
            window.held[thread] = (window.nextOrder, held)
            window.nextOrder += 1
        }
        self.windows[owner] = window
        return .hold(held, newThread: earlier == nil, passed: passed)
    }

    /// Ends the windows that are over by `now`: their held presentations to present (a burst of each owner's at
    /// most, which open its next window), and the stretches that end, in order of owner.
    public mutating func due(now: BootTime) -> [Action] {
        var actions: [Action] = []
        for owner in self.windows.keys.sorted() {
            let window = self.windows[owner]!
            guard window.start.advanced(by: self.bound.interval) <= now else { continue }
            guard !window.held.isEmpty else {
                if let stretch = window.stretch {
                    actions.append(.ended(owner: owner, held: stretch.held, presented: stretch.presented))
                }
                self.windows[owner] = nil
                continue
            }
            let presented = window.held.values.sorted { $0.order < $1.order }.prefix(self.bound.burst).map(\.held)
            actions += presented.map(Action.present)
            var stretch = window.stretch ?? Stretch()
            stretch.presented += presented.count
            var next = Window(start: now, presented: presented.count, nextOrder: window.nextOrder, stretch: stretch)
            next.held = window.held
            for held in presented { next.held[held.thread] = nil }
            self.windows[owner] = next
        }
        return actions
    }

    /// When ``due(now:)`` has something to do next: the end of the first window that holds presentations or is part
    /// of a stretch; `nil`: nothing.
    public var nextDue: BootTime? {
        self.windows.values.lazy.filter { !$0.held.isEmpty || $0.stretch != nil }.map { $0.start.advanced(by: self.bound.interval) }.min()
    }

    /// Forgets `thread`'s held presentation without presenting it (the user answered or removed it meanwhile): the
    /// thread's next presentation past the bound is held anew. It still counts in the stretch.
    public mutating func forget(_ thread: Thread, of owner: UInt32) {
        self.windows[owner]?.held[thread] = nil
    }

    /// How many presentations of `owner`'s apps are held.
    public func held(of owner: UInt32) -> Int {
        self.windows[owner]?.held.count ?? 0
    }
}
