/// A time zone's rules, read from its TZif file: which UT offset holds at each instant, and so which instants a
/// wall time stands for. Pure: the shell reads /usr/share/zoneinfo/NAME and hands the bytes in.
///
/// Before the first listed transition the first local time type holds (RFC 8536 §3.2); after the last one, the
/// footer's POSIX rule, or else the last transition's type.
public struct ZoneRules: Sendable, Hashable, CustomStringConvertible {
    /// One local time type: its offset east of UTC in seconds, whether it is DST, its abbreviation (`CEST`).
    public struct LocalTimeType: Sendable, Hashable {
        public var utOffset: Int
        public var isDST: Bool
        public var abbreviation: String

        public init(utOffset: Int, isDST: Bool, abbreviation: String) {
            self.utOffset = utOffset
            self.isDST = isDST
            self.abbreviation = abbreviation
        }
    }

    /// A change of offset: at `at` (UTC seconds) the offset goes from `before` to `after`.
    public struct Transition: Sendable, Hashable {
        public var at: Int64
        public var before: Int
        public var after: Int
    }

    /// The zone's name, as the shell looked it up (`Europe/Berlin`).
    public let name: String
    private let transitionTimes: [Int64]
    private let transitionTypes: [LocalTimeType]
    private let initial: LocalTimeType
    private let footer: PosixTimeZoneRule?

    /// UTC: offset 0, no transitions.
    public static let utc = ZoneRules(name: "UTC", fixed: LocalTimeType(utOffset: 0, isDST: false, abbreviation: "UTC"))

    /// A zone that keeps one offset for ever.
    public init(name: String, fixed type: LocalTimeType) {
        self.name = name
        self.transitionTimes = []
        self.transitionTypes = []
        self.initial = type
        self.footer = nil
    }

    /// Reads the TZif file's `bytes`.
    /// - Throws: ``ZoneRulesError`` saying what is wrong with them.
    public init(name: String, tzif bytes: [UInt8]) throws(ZoneRulesError) {
        var reader = TZifReader(bytes: bytes, zone: name)
        let contents = try reader.read()
        self.name = name
        self.transitionTimes = contents.transitions
        self.transitionTypes = contents.typeIndices.map { contents.types[$0] }
        self.initial = contents.types[0]
        if let footer = contents.footer {
            self.footer = try PosixTimeZoneRule(parsing: footer, zone: name)
        } else {
            self.footer = nil
        }
    }

    /// A zone given by a POSIX TZ rule alone (`CET-1CEST,M3.5.0,M10.5.0/3`), as the `TZ` variable may give one.
    /// - Throws: ``ZoneRulesError`` saying where the rule is wrong.
    public init(name: String, posixRule text: String) throws(ZoneRulesError) {
        let rule = try PosixTimeZoneRule(parsing: text, zone: name)
        self.name = name
        self.transitionTimes = []
        self.transitionTypes = []
        self.initial = rule.standard
        self.footer = rule
    }

    public var description: String { self.name }

    /// The local time type at `seconds` after the epoch (UTC).
    public func type(at seconds: Int64) -> LocalTimeType {
        if let footer = self.footer, seconds >= self.transitionTimes.last ?? Int64.min {
            return footer.type(at: seconds)
        }
        let after = self.firstTransition(after: seconds)
        return after == 0 ? self.initial : self.transitionTypes[after - 1]
    }

    /// The index of the first listed transition later than `seconds`.
    private func firstTransition(after seconds: Int64) -> Int {
        var low = 0
        var high = self.transitionTimes.count
        while low < high {
            let middle = (low + high) / 2
            if self.transitionTimes[middle] <= seconds { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The offset east of UTC, in seconds, at `seconds` after the epoch.
    public func offset(at seconds: Int64) -> Int { self.type(at: seconds).utOffset }

    /// The wall time at `instant`, seconds rounded down.
    public func localTime(at instant: WallTime) -> LocalDateTime { self.localTime(atSeconds: instant.seconds) }

    func localTime(atSeconds seconds: Int64) -> LocalDateTime {
        LocalDateTime(localSeconds: seconds + Int64(self.offset(at: seconds)))
    }

    /// The changes of offset from `start` to `end` (UTC seconds, both included), in order; listed transitions
    /// that keep the offset are left out.
    public func transitions(from start: Int64, through end: Int64) -> [Transition] {
        var result: [Transition] = []
        var previous = self.offset(at: start - 1)
        func add(_ at: Int64, _ type: LocalTimeType) {
            guard at >= start, at <= end, type.utOffset != previous else { return }
            result.append(Transition(at: at, before: previous, after: type.utOffset))
            previous = type.utOffset
        }
        var index = self.firstTransition(after: start - 1)
        while index < self.transitionTimes.count, self.transitionTimes[index] <= end {
            add(self.transitionTimes[index], self.transitionTypes[index])
            index += 1
        }
        if let footer = self.footer, end > self.transitionTimes.last ?? Int64.min {
            let last = self.transitionTimes.last ?? Int64.min
            let firstYear = LocalDateTime(localSeconds: max(start, last)).year - 1
            let lastYear = LocalDateTime(localSeconds: end).year + 1
            for year in firstYear...lastYear {
                for transition in footer.transitions(in: year) where transition.at > last { add(transition.at, transition.type) }
            }
        }
        return result
    }

    /// The instants (UTC seconds, in order) whose wall time is `local`: none in a gap (clocks set forward), two in
    /// a repeated hour (clocks set back), one otherwise.
    public func instants(for local: LocalDateTime) -> [Int64] {
        let wall = local.localSeconds
        // Every offset in force within two days of the wall time (offsets stay within ±26 hours).
        var offsets = [self.offset(at: wall - 2 * 86_400)]
        for transition in self.transitions(from: wall - 2 * 86_400, through: wall + 2 * 86_400) {
            offsets.append(transition.after)
        }
        var instants: [Int64] = []
        for offset in offsets {
            let instant = wall - Int64(offset)
            if self.offset(at: instant) == offset, !instants.contains(instant) { instants.append(instant) }
        }
        return instants.sorted()
    }

    /// For a wall time in a gap, the first wall time after the gap (the wall time of the transition that made it).
    func endOfGap(containing local: LocalDateTime) -> LocalDateTime? {
        let wall = local.localSeconds
        for transition in self.transitions(from: wall - 2 * 86_400, through: wall + 2 * 86_400)
        where transition.after > transition.before {
            let gapStart = transition.at + Int64(transition.before)
            let gapEnd = transition.at + Int64(transition.after)
            if wall >= gapStart, wall < gapEnd { return LocalDateTime(localSeconds: gapEnd) }
        }
        return nil
    }
}
