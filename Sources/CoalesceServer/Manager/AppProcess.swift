import Systemd

/// The process that runs an app, as the manager signals and inspects it: a ``ProcessHandle`` (a pidfd) in the
/// daemon, a fake one in a test of the manager in process.
protocol AppProcess: AnyObject, Sendable {
    var pid: Int32 { get }
    /// Sends `signal`; whether it was delivered (`false` once the process has exited).
    @discardableResult func signal(_ signal: ProcessSignal) -> Bool
    /// Whether the process still runs.
    var isAlive: Bool { get }
    /// What tells this process from any other that had or will have its pid (``ProcessHandle/identity``); `nil`
    /// once it is gone.
    var identity: String? { get }
    /// Whether the process is stopped by a signal (SIGSTOP).
    var isStopped: Bool { get }
    /// Whether the process's control group is frozen by the cgroup freezer.
    var isFrozen: Bool { get }
    /// Whether the process runs in `unit`.
    func runs(in unit: String) -> Bool
    /// Resident memory in bytes; `nil` once the process is gone.
    var residentBytes: Int? { get }
}

extension ProcessHandle: AppProcess {}

/// Opens the process with a pid, for a restart's take-up of an app whose process outlived the daemon
/// (``AppManager/restoreStates(_:into:store:opener:logger:)``): by its pidfd in the daemon.
struct ProcessOpener: Sendable {
    let open: @Sendable (Int32) -> (any AppProcess)?

    /// A pidfd for the pid, opened first so that the pid cannot pass to another process between a check and a use;
    /// `nil` when no process has it.
    static let pidfd = ProcessOpener { pid in
        try? ProcessHandle(pid: pid)  // no process has the pid (any more): nothing to take up
    }
}
