/// Which line of a PSI file a threshold reads: `some` (at least one task stalled on memory) or `full` (every
/// non-idle task stalled at once).
public enum StallKind: String, Sendable, Hashable, CaseIterable {
    case some
    case full
}

/// A level of memory pressure, as the kernel's PSI triggers take one: stall of `kind` adding up to at least `stall`
/// within any `window`.
public struct StallThreshold: Sendable, Hashable, CustomStringConvertible {
    public var kind: StallKind
    public var stall: Duration
    public var window: Duration

    public init(_ kind: StallKind, stall: Duration, window: Duration) {
        self.kind = kind
        self.stall = stall
        self.window = window
    }

    /// What is written to a pressure file to make its descriptor a trigger: `some 70000 2000000` (microseconds).
    public var triggerText: String {
        "\(self.kind.rawValue) \(Self.microseconds(self.stall)) \(Self.microseconds(self.window))"
    }

    /// As the configuration writes it: `some 70ms 2s`.
    public var description: String {
        "\(self.kind.rawValue) \(Self.spanText(self.stall)) \(Self.spanText(self.window))"
    }

    static func microseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    static func spanText(_ duration: Duration) -> String {
        let microseconds = Self.microseconds(duration)
        if microseconds % 1_000_000 == 0 { return "\(microseconds / 1_000_000)s" }
        if microseconds % 1000 == 0 { return "\(microseconds / 1000)ms" }
        return "\(microseconds)us"
    }
}

/// One reading of a PSI file (`/proc/pressure/memory` or a cgroup's `memory.pressure`): for each line, the running
/// averages over 10, 60 and 300 seconds (percent) and the total stall since boot (microseconds).
public struct PressureReading: Sendable, Hashable {
    public struct Line: Sendable, Hashable {
        public var avg10: Double
        public var avg60: Double
        public var avg300: Double
        public var total: UInt64

        public init(avg10: Double = 0, avg60: Double = 0, avg300: Double = 0, total: UInt64) {
            self.avg10 = avg10
            self.avg60 = avg60
            self.avg300 = avg300
            self.total = total
        }
    }

    public var some: Line
    public var full: Line

    public init(some: Line, full: Line) {
        self.some = some
        self.full = full
    }

    public subscript(kind: StallKind) -> Line {
        switch kind {
        case .some: self.some
        case .full: self.full
        }
    }

    /// Reads the file's text: `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and the same for `full`; `nil` when
    /// it is not that. A kernel without the `full` line for memory (none has been) would read as no full stall.
    public init?(parsing text: String) {
        var lines: [StallKind: Line] = [:]
        for row in text.split(separator: "\n") {
            let fields = row.split(separator: " ")
            guard let first = fields.first, let kind = StallKind(rawValue: String(first)) else { continue }
            var values: [Substring: Substring] = [:]
            for field in fields.dropFirst() {
                guard let equals = field.firstIndex(of: "=") else { return nil }
                values[field[..<equals]] = field[field.index(after: equals)...]
            }
            guard let total = values["total"].flatMap({ UInt64($0) }), let avg10 = values["avg10"].flatMap({ Double($0) }),
                let avg60 = values["avg60"].flatMap({ Double($0) }), let avg300 = values["avg300"].flatMap({ Double($0) })
            else { return nil }
            lines[kind] = Line(avg10: avg10, avg60: avg60, avg300: avg300, total: total)
        }
        guard let some = lines[.some] else { return nil }
        self.some = some
        self.full = lines[.full] ?? Line(total: 0)
    }
}

/// How hard memory is pressed, by the configured thresholds.
public enum PressureLevel: String, Sendable, Hashable, Comparable {
    case normal
    case warning
    case critical

    private var rank: Int {
        switch self {
        case .normal: 0
        case .warning: 1
        case .critical: 2
        }
    }

    public static func < (lhs: PressureLevel, rhs: PressureLevel) -> Bool { lhs.rank < rhs.rank }
}

/// What the memory pressure policy decides.
public enum PressureDecision: Sendable, Hashable {
    /// Tell every running app didReceiveMemoryWarning.
    case warn
    /// Purge the suspended app with the largest resident set (``PurgeOrder``); if none is left, tell the policy
    /// (``MemoryPressurePolicy/nothingLeftToPurge()``).
    case purge
    /// The level changed (for the journal).
    case level(from: PressureLevel, to: PressureLevel)
}

/// Memory pressure as a pure policy: readings of the PSI file come in with `now` (and which of the kernel's
/// triggers fired, if any), decisions go out. It keeps no clock and opens no file; ``nextReading`` says when the
/// shell must read again.
///
/// - At the warning level, running apps are warned (didReceiveMemoryWarning), at most once per warning window.
/// - At the critical level, suspended apps are purged one at a time, the largest first: after each purge the
///   policy waits one warning window, so that the stall it measures is all from after the purge, and purges the
///   next while that stall is still at the warning level, until it is below it or no suspended app is left.
///
/// A threshold is exceeded when its trigger fired (the kernel measured it), or when the readings' total stall grew
/// by at least the threshold's stall over its window (the total read at the window's start interpolated between
/// the readings around it). Readings that do not reach back a whole window measure nothing.
public struct MemoryPressurePolicy<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public let warning: StallThreshold
    public let critical: StallThreshold
    public private(set) var level: PressureLevel = .normal
    /// The last reading.
    public private(set) var reading: PressureReading?

    private struct Sample {
        var at: Instant
        var some: UInt64
        var full: UInt64

        func total(_ kind: StallKind) -> UInt64 { kind == .some ? self.some : self.full }
    }

    private var samples: [Sample] = []
    private var lastWarning: Instant?
    /// While purging: when the last purge was decided.
    private var lastPurge: Instant?
    /// When a reading last found pressure (a level above normal), so that the policy reads again to see it end.
    private var lastPressed: Instant?

    public init(warning: StallThreshold, critical: StallThreshold) {
        self.warning = warning
        self.critical = critical
    }

    /// Whether a purge episode is under way (the policy waits between purges).
    public var purging: Bool { self.lastPurge != nil }

    /// How long the policy waits after a purge before it measures again: one warning window.
    public var settle: Duration { self.warning.window }

    private var longestWindow: Duration { max(self.warning.window, self.critical.window) }

    /// When the shell must read the file again, whether or not a trigger fires: one warning window after a purge,
    /// and one longest window after a reading that found pressure (to see it end); `nil`: only when a trigger fires
    /// (or at the shell's own polling interval).
    public var nextReading: Instant? {
        if let lastPurge = self.lastPurge { return lastPurge.advanced(by: self.settle) }
        if let lastPressed = self.lastPressed { return lastPressed.advanced(by: self.longestWindow) }
        return nil
    }

    /// The stall of `kind` measured over the `window` that ends `now`, from the readings; `nil` when they do not
    /// reach back that far.
    public func measuredStall(_ kind: StallKind, over window: Duration, now: Instant) -> Duration? {
        guard let last = self.samples.last else { return nil }
        let start = now.advanced(by: .zero - window)
        guard let first = self.samples.first, first.at <= start else { return nil }
        // The last sample at or before the window's start, and the one after it.
        var index = 0
        while index + 1 < self.samples.count, self.samples[index + 1].at <= start { index += 1 }
        let before = self.samples[index]
        var atStart = Double(before.total(kind))
        if index + 1 < self.samples.count {
            let after = self.samples[index + 1]
            let span = before.at.duration(to: after.at)
            if span > .zero {
                let fraction = Self.seconds(before.at.duration(to: start)) / Self.seconds(span)
                atStart += fraction * (Double(after.total(kind)) - Double(before.total(kind)))
            }
        }
        let grown = max(0, Double(last.total(kind)) - atStart)
        return .microseconds(Int64(grown.rounded()))
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    private func exceeded(_ threshold: StallThreshold, fired: Bool, now: Instant) -> Bool {
        if fired { return true }
        guard let stall = self.measuredStall(threshold.kind, over: threshold.window, now: now) else { return false }
        return stall >= threshold.stall
    }

    /// One reading of the pressure file at `now`, with the levels whose kernel trigger fired since the last.
    public mutating func observe(
        _ reading: PressureReading,
        fired: Set<PressureLevel> = [],
        now: Instant
    ) -> [PressureDecision] {
        if let last = self.samples.last, now < last.at { return [] }  // readings come in order; a stale one tells nothing
        self.reading = reading
        self.samples.append(Sample(at: now, some: reading.some.total, full: reading.full.total))
        self.forget(before: now)

        let critical = self.exceeded(self.critical, fired: fired.contains(.critical), now: now)
        let warning = critical || self.exceeded(self.warning, fired: fired.contains(.warning), now: now)
        let level: PressureLevel = critical ? .critical : warning ? .warning : .normal
        var decisions: [PressureDecision] = []
        if level != self.level {
            decisions.append(.level(from: self.level, to: level))
            self.level = level
        }
        self.lastPressed = level == .normal ? nil : now
        if warning, self.lastWarning.map({ now >= $0.advanced(by: self.warning.window) }) ?? true {
            decisions.append(.warn)
            self.lastWarning = now
        }
        if let lastPurge = self.lastPurge {
            guard now >= lastPurge.advanced(by: self.settle) else { return decisions }
            // The warning window that ends now began after the purge: its stall is what the purge left.
            let stall = self.measuredStall(self.warning.kind, over: self.warning.window, now: now)
            if stall.map({ $0 >= self.warning.stall }) ?? warning {
                decisions.append(.purge)
                self.lastPurge = now
            } else {
                self.lastPurge = nil
            }
        } else if critical {
            decisions.append(.purge)
            self.lastPurge = now
        }
        return decisions
    }

    /// The shell found no suspended app to purge: the episode ends (a later critical reading starts another).
    public mutating func nothingLeftToPurge() {
        self.lastPurge = nil
    }

    /// Keeps the samples that can still be the start of a window: those within the longest window, and the last one
    /// before it.
    private mutating func forget(before now: Instant) {
        let horizon = now.advanced(by: .zero - self.longestWindow)
        var drop = 0
        while drop + 1 < self.samples.count, self.samples[drop + 1].at <= horizon { drop += 1 }
        if drop > 0 { self.samples.removeFirst(drop) }
    }
}

/// Which suspended apps a purge takes first: the largest resident set, then by name, so that the operator's Purge
/// and memory pressure choose alike.
public enum PurgeOrder {
    /// The apps in the order they are purged: most resident bytes first, ties by name.
    public static func largestFirst<Name: Comparable>(_ residentBytes: [Name: Int]) -> [Name] {
        residentBytes.keys.sorted { (residentBytes[$0]!, $1) > (residentBytes[$1]!, $0) }
    }
}
