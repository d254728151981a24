/// What can interrupt an app on screen: each keeps it from being active until it ends.
public enum InterruptionCause: String, Sendable, Hashable, CaseIterable {
    /// An operator's or a shell's `Interrupt` (a call).
    case requested
    /// An alert of the app's own notifications over it (``AlertInterruptions``).
    case alert
    /// The system is going to sleep.
    case sleep
    /// The seat's screen is locked.
    case lock

    /// The transition's reason as the interruption begins for this cause.
    public var beginning: TransitionReason {
        switch self {
        case .requested, .alert: .interruptionBegan
        case .sleep: .sleep
        case .lock: .lock
        }
    }

    /// The transition's reason as the interruption ends with this cause.
    public var ending: TransitionReason {
        switch self {
        case .requested, .alert: .interruptionEnded
        case .sleep: .wake
        case .lock: .unlock
        }
    }
}

/// The causes an app's interruption has now. An interruption begins with its first cause and ends with its last:
/// an app the lock interrupted is not made active by the wake from a sleep that came meanwhile, nor by the end of an
/// operator's interruption; it is by the unlock.
public struct Interruptions: Sendable, Hashable {
    public private(set) var causes: Set<InterruptionCause> = []

    public init() {}

    public var isEmpty: Bool { self.causes.isEmpty }

    /// `cause` begins; returns whether the interruption begins with it (it had no cause before).
    public mutating func begin(_ cause: InterruptionCause) -> Bool {
        let begins = self.causes.isEmpty
        self.causes.insert(cause)
        return begins
    }

    /// `cause` ends; returns whether the interruption ends with it (it was the last). A cause it did not have ends
    /// nothing.
    public mutating func end(_ cause: InterruptionCause) -> Bool {
        guard self.causes.remove(cause) != nil else { return false }
        return self.causes.isEmpty
    }

    /// The app left the screen or stopped: whatever interrupted it is over for it.
    public mutating func clear() {
        self.causes = []
    }
}
