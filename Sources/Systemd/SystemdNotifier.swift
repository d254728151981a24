import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager how the daemon is doing (`sd_notify`), for `Type=notify` units.
///
/// Every method does nothing when `NOTIFY_SOCKET` is unset, so the daemon runs the same outside systemd.
public struct SystemdNotifier: Sendable {
    public init() {}

    /// Start-up is finished and the daemon serves.
    public func ready(status: String) { self.send("READY=1\nSTATUS=\(Self.oneLine(status))") }

    /// Start-up will take longer than usual (recovering state): the manager waits `duration` more from now before
    /// it gives up on READY=1.
    public func extendTimeout(by duration: Duration, status: String) {
        self.send("EXTEND_TIMEOUT_USEC=\(duration.components.seconds * 1_000_000)\nSTATUS=\(Self.oneLine(status))")
    }

    /// A one-line summary for `systemctl status`.
    public func status(_ status: String) { self.send("STATUS=\(Self.oneLine(status))") }

    /// A configuration reload begins; end it with ``ready(status:)``.
    public func reloading() {
        self.send("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())")
    }

    /// The daemon is shutting down.
    public func stopping(status: String) { self.send("STOPPING=1\nSTATUS=\(Self.oneLine(status))") }

    /// Keep-alive for `WatchdogSec=`.
    public func watchdog() { self.send("WATCHDOG=1") }

    /// How often the service manager expects ``watchdog()``, or `nil` when it expects none. Pings should come at
    /// half this interval, as sd_watchdog_enabled(3) advises.
    public var watchdogTimeout: Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(clamping: microseconds))
    }

    private func send(_ state: String) {
        // Notification is advisory; a manager that went away cannot be told anything anyway.
        _ = sd_notify(0, state)
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }

    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
