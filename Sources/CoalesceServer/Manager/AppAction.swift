import CoalesceCore
import CoalesceStore
import NIOCore
import Systemd
import Varlink

/// One thing the manager decided under its lock and carries out after letting go (``AppManager/decide(_:)``), in
/// the order decided (``Outbox``): what reaches a stream, the store, a process, systemd, a timer or a waiting task.
enum AppAction: Sendable {
    /// Replies on a stream: an app's callbacks and first state, a monitor's records.
    case send(VarlinkResponder, [JSONObject])
    /// Events an inbox sent, as one burst on the app's stream (encoded here, not under the lock).
    case sendEvents(VarlinkResponder, [AppManager.AppInbox.Sent], AppState)
    /// The last reply of a stream.
    case finish(VarlinkResponder, JSONObject)
    /// A parked stream's task hears how its stream ended.
    case endPark(CheckedContinuation<AppManager.StreamEnd, Never>, AppManager.StreamEnd)
    /// Launch calls waiting for the app hear that it attached (`nil`), or why it will not.
    case answerLaunch([CheckedContinuation<Void, any Error>], SystemError?)
    /// An inbox's write, made under the lock (so that later posts can join it) and handed to the store here.
    case submit(EventWrite, together: Bool)
    /// Posts that came together are all in: the store begins their transaction.
    case hurryStore
    /// The app's state and process, for a restart to take up.
    case recordState(AppName, Store.RecordedState)
    /// What an inbox decided besides its sends and write: answers to posters, events forgotten, a retry.
    case carryOut(AppName, [AppManager.InboxAction], failure: StoreError?)
    /// Apps that woke not knowing the lock's state are told it.
    case tellProtectedData([(AppName, Bool)])
    case signal(any AppProcess, ProcessSignal)
    /// SIGCONT to a process held while suspended; logged when the process was still there to continue.
    case continueProcess(any AppProcess, AppManager.LogEntry)
    /// SIGSTOP to a suspended app's process; logged when it was still there to stop.
    case stopProcess(any AppProcess, AppManager.LogEntry)
    /// A terminated app's process: SIGTERM after the grace (``Termination``).
    case startTermination(Termination)
    /// It acknowledged willTerminate: SIGTERM now.
    case terminationAcknowledged(Termination)
    /// FreezeUnit or ThawUnit for the app's launch unit, its answer fed to the app's ``SuspensionHold``.
    case unitCall(AppName, UnitCall)
    case log(AppManager.LogEntry)
    /// Arms the timer (replacing the one armed with its name) to fire `after` from when it was decided (on the
    /// event loop's clock), or, `nil`, cancels it: carried out a moment later, it fires when it would have.
    case arm(AppTimer, after: Duration?, decided: NIODeadline)
}

/// A call to systemd about an app's launch unit.
enum UnitCall: Sendable {
    /// FreezeUnit, unless the unit must not be frozen.
    case freeze(unit: String)
    /// ThawUnit; `process` is looked at if the call fails, to tell a unit thawed meanwhile from one still frozen.
    case thaw(unit: String, process: (any AppProcess)?)

    var unit: String {
        switch self {
        case .freeze(let unit), .thaw(let unit, _): unit
        }
    }
}

/// The manager's timers, by what they are for; one of each name is armed at a time.
enum AppTimer: Hashable, Sendable {
    /// The app's lifecycle's next deadline.
    case deadline(AppName)
    /// The delay after which a suspended app's process is held.
    case suspensionDelay(AppName)
    /// How long a process taken up after a restart has to attach again.
    case reattach(AppName)
    /// How long a Launch waits for the app's process to attach.
    case launch(AppName)
    /// A unit call that failed is made again.
    case unitRetry(AppName)
}
