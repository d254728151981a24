/// Decides whether a jump of the wall clock is news to the apps (`lifecycle.significantTimeChange`).
///
/// The kernel reports a resume from sleep as a setting of the clock (its `TFD_TIMER_CANCEL_ON_SET` timers are
/// cancelled then too), and that report may come before or after logind's PrepareForSleep(false). The sleep's own
/// report is not a change anyone made: the apps hear of the wake instead. So a report while the system sleeps is
/// the resume's, and so is the first one within ``resumeWindow`` of a wake that had none while it slept.
public struct ClockChangeFilter<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// How long after a wake the resume's report may come.
    public var resumeWindow: Duration
    private var sleeping = false
    /// The wake whose report has not come yet.
    private var awaitingResumeReport: Instant?
    private var reportedWhileAsleep = false

    public init(resumeWindow: Duration = .seconds(5)) {
        self.resumeWindow = resumeWindow
    }

    /// The system is going to sleep (PrepareForSleep(true)).
    public mutating func willSleep(now: Instant) {
        self.sleeping = true
        self.reportedWhileAsleep = false
        self.awaitingResumeReport = nil
    }

    /// The system woke (PrepareForSleep(false)).
    public mutating func didWake(now: Instant) {
        guard self.sleeping else { return }
        self.sleeping = false
        self.awaitingResumeReport = self.reportedWhileAsleep ? nil : now
    }

    /// The clock was reported set; returns whether the apps are told.
    public mutating func clockChanged(now: Instant) -> Bool {
        if self.sleeping {
            self.reportedWhileAsleep = true
            return false
        }
        if let woke = self.awaitingResumeReport {
            self.awaitingResumeReport = nil
            if now < woke.advanced(by: self.resumeWindow) { return false }
        }
        return true
    }
}
