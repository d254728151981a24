/// The X11 session's focused window as the report shows it, from the reads of the root's `_NET_ACTIVE_WINDOW`.
///
/// openbox writes that property twice for each change of focus, mostly None first and then the window that takes
/// the focus, a fraction of a millisecond later: reported as read, nearly every switch would make the app that had
/// the focus inactive and active again. So a None read after a window is held back: the window that had the focus
/// stays the focused one for ``holdTime``, and None is reported only if it is still what the property says then. A
/// window read meanwhile ends the hold; a read of None meanwhile does not lengthen it.
struct ActiveWindowHold: Hashable {
    /// How long a None read is held back: tens of times the 0.75 ms (p50; 4.7 ms p99) between openbox's two writes
    /// measured on a loaded two-core machine, and short beside what a person notices.
    static let holdTime = Duration.milliseconds(50)

    let holdTime: Duration
    /// The window the report shows as focused; `nil`: none.
    private(set) var reported: UInt32?
    /// When a None held back is reported unless a window is read before; `nil` while none is held.
    private(set) var deadline: ContinuousClock.Instant?

    init(holdTime: Duration = Self.holdTime) {
        self.holdTime = holdTime
    }

    /// `_NET_ACTIVE_WINDOW` read at `now` as `value` (`nil`: None); returns the window to report as focused.
    mutating func propertyRead(_ value: UInt32?, now: ContinuousClock.Instant) -> UInt32? {
        if let value {
            self.reported = value
            self.deadline = nil
        } else if let deadline = self.deadline {
            if now >= deadline { self.release() }
        } else if self.reported != nil {
            self.deadline = now + self.holdTime
        }
        return self.reported
    }

    /// The deadline has come without a window read: `.changed` (the caller reads the property again, and a None it
    /// reads then is reported), or `.nothing` when no None is held or its time has not come.
    mutating func deadlinePassed(now: ContinuousClock.Instant) -> WindowNews {
        guard let deadline = self.deadline, now >= deadline else { return .nothing }
        self.release()
        return .changed
    }

    private mutating func release() {
        self.reported = nil
        self.deadline = nil
    }
}
