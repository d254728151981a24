import CoalesceCore
import CoalesceStore
import CoalesceWire
import Varlink

/// One app as the manager holds it: its registration, its lifecycle, its inbox, its process and stream, its hold
/// while suspended and what it was last told of the screen lock; and what the app decides on its own, without the
/// rest of the manager: the replies that carry its callbacks, what its hold needs to know of it, when its timer is
/// armed, what is recorded of it for a restart, what is news to it. What its inbox needs to know of it is read
/// where a post is decided (`+Events`: ``AppManager/numbering(_:_:_:)``), so that a post's decision compiles to one
/// body.
///
/// The registry (``AppManager/State``) owns every record; the manager feeds a record one input at a time, under its
/// lock, and queues what it returns (`+Lifecycle`, `+Events`, `+Suspension`).
extension AppManager {
    struct Attachment {
        var id: Int
        var responder: VarlinkResponder
        var process: (any AppProcess)?
        var pid: Int32
        /// What tells the process from a later one with its pid (``ProcessHandle/identity``), recorded with the state.
        var identity: String?
    }

    /// The process of an app whose state was taken up from the store at start-up: it outlived the daemon's last run
    /// and has not attached again yet.
    struct RestoredProcess {
        var process: any AppProcess
        var identity: String
        /// Its time to attach again runs (``AppTimer/reattach(_:)``): not while it is held.
        var timeoutArmed = false
        /// Callbacks of what happened to the app meanwhile (a System request), in order: sent when it attaches.
        var unsent: [JSONObject] = []
    }

    struct PendingLaunch {
        var destination: LaunchDestination
        var reason: LaunchReason
        var waiters: [CheckedContinuation<Void, any Error>] = []
    }

    /// One app: see the top of this file.
    struct Record {
        var registration: AppRegistration
        var lifecycle: AppLifecycle<Instant>
        var attachment: Attachment?
        var pendingLaunch: PendingLaunch?
        /// The deadline its timer is armed for (``AppTimer/deadline(_:)``).
        var deadline: Instant?
        var since: Double
        /// Why it came to its state (`nil`: it has been in it since the daemon took it up).
        var reason: TransitionReason?
        /// The willTerminate an ended process may still acknowledge, so that it is signalled at once.
        var termination: Termination?
        /// Running by the state recorded before a restart of the daemon, waiting for its process to attach again.
        var restored: RestoredProcess?
        /// The background task each running refresh holds it by, by the refresh's id.
        var refreshTasks: [String: Int] = [:]

        /// The process that runs the app: the attached one, or the one taken up after a restart that has not
        /// attached again.
        var process: (handle: (any AppProcess)?, pid: Int32, identity: String?)? {
            if let attachment { return (attachment.process, attachment.pid, attachment.identity) }
            if let restored { return (restored.process, restored.process.pid, restored.identity) }
            return nil
        }
        /// Policies per kind and who may post.
        var declarations = EventDeclarations()
        /// Its events: held, sent and not acknowledged, stored and not sent, and its write with the store.
        var inbox: AppInbox
        /// A refused delivery of what the app held was logged; its success is logged when it comes.
        var deliveryRefused = false
        /// The app is among those whose inbox makes its write at the end of the event loop's pass.
        var flushQueued = false
        /// The write of its inbox's the store is carrying out, until the store answers it.
        var pendingWrite: EventWrite?
        /// Journal watches' positions (by watch, the cursor) that go with the write its waiting posts go into
        /// (``JournalMarks``).
        var journalMarks = JournalMarks()
        /// Its owner's account with the quotas, which its events are charged to.
        var account: QuotaLedger.Account
        /// What the app was last told of the screen lock (protected data available or not); an app is launched
        /// into an unlocked world, and told otherwise as it starts.
        var toldProtectedDataAvailable = true
        /// Its process stopped or frozen while it is suspended (`+Suspension`).
        var suspension = SuspensionHold<HeldProcess>()
        /// Its scenes: its windows as its user's session reports them (`+Scenes`).
        var scenes = AppScenes()
        /// What interrupts it now (the lock, a sleep, an operator's Interrupt): active again after the last ends.
        var interruptions = Interruptions()
        /// Scene callbacks decided while it ran no code: sent on its wake, before its events.
        var heldSceneCallbacks: [(SceneCallback, SceneID, SceneConnection?)] = []
    }
}

extension AppManager.Record {
    /// The app as both interfaces report it.
    var snapshot: AppManager.Snapshot {
        AppManager.Snapshot(
            registration: self.registration,
            state: self.lifecycle.state,
            pid: self.process?.pid,
            attached: self.attachment != nil,
            tasks: self.lifecycle.tasks.count,
            since: self.since,
            hold: self.suspension.held?.how,
            scenes: self.scenes.scenes.values.sorted { $0.id.value < $1.id.value }
        )
    }

    /// Its state and the process running it, as a restart of the daemon takes them up.
    var recordedState: Store.RecordedState {
        var recorded = Store.RecordedState(state: self.lifecycle.state, interrupted: self.lifecycle.interrupted)
        if recorded.state.isRunning, let process = self.process {
            recorded.pid = process.pid
            recorded.process = process.identity
        }
        return recorded
    }

    // MARK: Its lifecycle's callbacks

    /// The reply that carries one of its lifecycle's callbacks, given in `current` (the state it is in as it gets
    /// it), and the stream it goes on. A process taken up after a restart of the daemon that has not attached again
    /// keeps it and gets it when it attaches (within its deadline, if it has one): then, and with no process, `nil`.
    mutating func callback(
        _ callback: LifecycleCallback,
        sequence: UInt64,
        task: Int?,
        in current: AppState,
        launch: LaunchOptions?
    ) -> (stream: VarlinkResponder, reply: JSONObject)? {
        guard self.attachment != nil || self.restored != nil else { return nil }
        var event: JSONObject = ["seq": .int(Int64(sequence)), "kind": .string(callback.kind)]
        if let task { event["task"] = .int(Int64(task)) }
        if callback == .willFinishLaunching || callback == .didFinishLaunching {
            event["launchOptions"] = .object((launch ?? LaunchOptions(destination: .foreground)).wire)
        }
        let reply: JSONObject = ["state": .string(current.rawValue), "callback": .object(event)]
        if let attachment = self.attachment { return (attachment.responder, reply) }
        self.restored?.unsent.append(reply)
        return nil
    }

    /// Its process goes, killed or ended: the stream attached to it, which the manager ends.
    mutating func detach() -> AppManager.Attachment? {
        defer { self.attachment = nil }
        return self.attachment
    }

    // MARK: Its timer

    /// Follows its lifecycle's next deadline: true when that moved, and its timer is to be armed for ``deadline``
    /// (disarmed when there is none).
    mutating func followsNextDeadline() -> Bool {
        let next = self.lifecycle.nextDeadline
        guard next != self.deadline else { return false }
        self.deadline = next
        return true
    }

    // MARK: What it was told of the screen lock

    /// Whether `available` is news to it; when it is, it counts as told from now on.
    mutating func tell(protectedDataAvailable available: Bool) -> Bool {
        guard self.toldProtectedDataAvailable != available else { return false }
        self.toldProtectedDataAvailable = available
        return true
    }

    /// It runs no process now: a later launch starts it in an unlocked world (told otherwise as it starts).
    mutating func forgetsTheLock() {
        self.toldProtectedDataAvailable = true
    }

    // MARK: Its suspension

    /// The app as its hold sees it. `mode` is read only for a suspended app (the others are not held, and most
    /// inputs need not read the configuration); `killing` is what the decision it is part of kills.
    func holdSituation(mode: @autoclosure () -> SuspensionMode, firstSequence: UInt64, killing: [any AppProcess]) -> AppManager.Hold.Situation {
        AppManager.Hold.Situation(
            state: self.lifecycle.state,
            mode: self.lifecycle.state == .suspended ? mode() : .cooperative,
            process: self.process?.handle.map(HeldProcess.init),
            attached: self.attachment?.process.map(HeldProcess.init),
            lastSent: self.lifecycle.nextSequence - 1,
            firstSequence: firstSequence,
            killing: killing.map(HeldProcess.init)
        )
    }
}
