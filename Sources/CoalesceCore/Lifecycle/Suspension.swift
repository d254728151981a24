/// How a suspended app is kept from running code (DESIGN.md §5, real suspension). The raw value is the name in
/// the configuration (`[Apps] Suspension=`) and in Register's `suspension`.
public enum SuspensionMode: String, Sendable, Hashable, CaseIterable {
    /// Frozen with systemd's cgroup freezer (FreezeUnit) when its process runs in its launch unit and the unit can
    /// be frozen safely; stopped otherwise. The default.
    case freeze
    /// Its process stopped with SIGSTOP, continued with SIGCONT.
    case stop
    /// Told it is suspended and trusted to run no code; nothing is done to its process.
    case cooperative

    /// The values, as an error lists them.
    public static let names = allCases.map(\.rawValue).joined(separator: ", ")
}

/// How a suspended app's process is held now. The raw value is the wire name (`suspendedAs`).
public enum ProcessHold: String, Sendable, Hashable {
    /// Stopped with SIGSTOP.
    case stopped
    /// Frozen by systemd (its unit's FreezerState is frozen).
    case frozen
}

/// When a suspended app's process is held: the rule the shell applies after every change to the app.
public enum SuspensionRule {
    /// Whether the app's process should be stopped or frozen now: it is suspended, its mode is not cooperative, it
    /// has a stream attached (a process that outlived a restart of the daemon is left to attach again first), and
    /// it has acknowledged everything it was sent (so that the reply to what suspended it, its last Ack, is read).
    /// - Parameters:
    ///   - acknowledged: the highest number the app acknowledged.
    ///   - lastSent: the highest number its stream was given (callbacks and events share the counter).
    public static func holds(
        state: AppState,
        mode: SuspensionMode,
        attached: Bool,
        acknowledged: UInt64,
        lastSent: UInt64
    ) -> Bool {
        state == .suspended && mode != .cooperative && attached && acknowledged >= lastSent
    }
}
