public import CoalesceCore

/// `[Memory]`: how the daemon follows memory pressure (the kernel's PSI): the levels at which running apps are
/// warned and suspended apps purged, and the file it reads.
public struct MemorySettings: Sendable, Hashable {
    /// `Pressure=`: whether the daemon follows memory pressure at all.
    public var enabled = true
    /// `Warning=`: running apps are told didReceiveMemoryWarning, at most once per window. The default is GLib's
    /// first low-memory level (gio/gmemorymonitorpsi.c: 70 ms of partial stall per 2 s).
    public var warning = StallThreshold(.some, stall: .milliseconds(70), window: .seconds(2))
    /// `Critical=`: suspended apps are purged, the largest first. The default is GLib's critical level (100 ms of
    /// complete stall per 2 s), far below systemd-oomd's 60% of complete stall over 10 s, so that suspended apps go
    /// before systemd-oomd kills whole units.
    public var critical = StallThreshold(.full, stall: .milliseconds(100), window: .seconds(2))
    /// `PressureFile=`: the PSI file read; `nil`: the whole machine's, `/proc/pressure/memory`.
    public var pressureFile: String?

    public static let machinePressureFile = "/proc/pressure/memory"

    /// The file read: ``pressureFile`` or the machine's.
    public var path: String { self.pressureFile ?? Self.machinePressureFile }

    public init() {}
}

extension ConfigurationKey {
    static let memoryKeys: [String: Setter] = [
        "Pressure": { configuration, value throws(ConfigurationValueError) in
            configuration.memory.enabled = value.isEmpty ? true : try parseBoolean(value)
        },
        "Warning": { configuration, value throws(ConfigurationValueError) in
            configuration.memory.warning = value.isEmpty ? MemorySettings().warning : try parseStallThreshold(value)
        },
        "Critical": { configuration, value throws(ConfigurationValueError) in
            configuration.memory.critical = value.isEmpty ? MemorySettings().critical : try parseStallThreshold(value)
        },
        "PressureFile": { configuration, value throws(ConfigurationValueError) in
            guard !value.isEmpty else {
                configuration.memory.pressureFile = nil
                return
            }
            guard value.hasPrefix("/") else {
                throw ConfigurationValueError(reason: "expected an absolute path, such as /sys/fs/cgroup/system.slice/memory.pressure")
            }
            configuration.memory.pressureFile = value
        },
    ]

    /// The windows the kernel takes for a trigger (kernel/sched/psi.c): 500 ms (the least every kernel with
    /// triggers takes) to 10 s.
    static let pressureWindows: ClosedRange<Duration> = .milliseconds(500) ... .seconds(10)

    /// `some 70ms 2s`, `full 100ms 2s`, `full 60% 10s`: which stall, how much of it (a time span, or a share of the
    /// window), and within which window.
    static func parseStallThreshold(_ value: String) throws(ConfigurationValueError) -> StallThreshold {
        let words = value.split(separator: " ", omittingEmptySubsequences: true)
        guard words.count == 3 else {
            throw ConfigurationValueError(reason: "expected some or full, a stall and a window, such as 'some 70ms 2s' or 'full 60% 10s'")
        }
        guard let kind = StallKind(rawValue: String(words[0])) else {
            throw ConfigurationValueError(reason: "'\(words[0])' is not a kind of stall: expected some (at least one task stalled) or full (every task stalled)")
        }
        let window = try parseTimeSpan(String(words[2]), otherwise: " for the window")
        guard Self.pressureWindows.contains(window) else {
            throw ConfigurationValueError(reason: "the window must be from 500ms to 10s, as the kernel's triggers take it")
        }
        let stall: Duration
        if words[1].hasSuffix("%") {
            guard let percent = Double(words[1].dropLast()), percent > 0, percent <= 100 else {
                throw ConfigurationValueError(reason: "a share of the window must be more than 0% and at most 100%")
            }
            stall = .microseconds(Int64((Double(window.nanoseconds / 1000) * percent / 100).rounded()))
        } else {
            stall = try parseTimeSpan(String(words[1]), otherwise: " for the stall, or a share of the window such as 60%")
        }
        guard stall <= window else {
            throw ConfigurationValueError(reason: "the stall cannot be longer than its window")
        }
        guard stall >= .microseconds(1) else { throw ConfigurationValueError(reason: "the stall must be at least 1us") }
        return StallThreshold(kind, stall: stall, window: window)
    }
}
