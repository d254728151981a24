public import CoalesceCore
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings, from `coalesced.conf` and its drop-ins.
public struct Configuration: Sendable, Hashable {
    /// `[Daemon] LogLevel=`: the least severe level logged.
    public var logLevel: Logger.Level = .info
    /// `[Varlink] MaxMessageSize=`: the largest message a client may send, in bytes.
    public var maxMessageSize: Int = 1 << 20
    /// `[Varlink] MaxConnections=`: connections served at once.
    public var maxConnections: Int = 4096
    /// `[Varlink] MaxConnectionsPerUser=`: connections served at once for one uid other than root and the admin
    /// group's.
    public var maxConnectionsPerUser: Int = 256
    /// `[Varlink] ReservedConnections=`: of ``maxConnections``, those kept for root, the daemon's own user and the
    /// admin group, so that they can connect however many others hold.
    public var reservedConnections: Int = 32
    /// `[Varlink] IncompleteMessageTimeoutSec=`: how long a client may leave a message unfinished (sent in part,
    /// without its closing NUL) before its connection is closed.
    public var incompleteMessageTimeout: Duration = .seconds(10)
    /// `[Varlink] EventLoops=`: threads serving connections, each connection on one of them. Read at start only.
    public var eventLoops: Int = 1
    /// `[Daemon] AdminGroup=`: members of this group may call the System interface, besides root and the
    /// daemon's own user. Resolved to its id when the configuration is read.
    public var adminGroup: AdminGroup?
    /// `[Apps] MaxApps=`: how many apps may be registered.
    public var maxApps: Int = 65536
    /// `[Apps] AcknowledgeTimeoutSec=`, `BackgroundTaskBudgetSec=`, `BackgroundTaskWarningSec=`,
    /// `BackgroundTaskExpiry=`: the lifecycle's deadlines and budget (`nil`: `infinity`, none).
    public var timings = LifecycleTimings()
    /// `[Apps] LaunchTimeoutSec=`: how long System.Launch waits for the app to attach, and an app whose process
    /// outlived a restart of the daemon has to attach again; `nil` (`infinity`): as long as it takes.
    public var launchTimeout: Duration? = .seconds(10)
    /// `[Apps] TerminateGraceSec=`: how long a terminated app has between SIGTERM and SIGKILL, and to acknowledge
    /// willTerminate before SIGTERM.
    public var terminateGrace: Duration = .seconds(5)
    /// `[Apps] ExclusiveForeground=`: one app in the foreground per seat, as on a phone.
    public var exclusiveForeground = true
    /// `[Apps] MaxSavedState=`: the largest SaveState an app may keep, in bytes.
    public var maxSavedState: Int = 64 << 10
    /// `[Apps] Suspension=`: how a suspended app that registered no `suspension` of its own is kept from running
    /// code.
    public var suspension: SuspensionMode = .freeze
    /// `[Apps] SuspensionDelaySec=`: how long after an app is suspended its process is stopped or frozen, so that
    /// what it sent last (its EndBackgroundTask, its Ack) is read first.
    public var suspensionDelay: Duration = .milliseconds(200)
    /// `[Events] MaxKindsPerApp=`: kinds an app may hold while it receives nothing.
    public var maxKindsPerApp: Int = 1024
    /// `[Events] MaxPayloadSize=`: the largest payload of a post, its JSON text as sent, in bytes.
    public var maxPayloadSize: Int = 64 << 10
    /// `[Quotas]`: what one user's apps, and all apps, may take.
    public var quotas = Quotas()
    /// `[Notifications]`: local notifications' limits and command.
    public var notifications = NotificationSettings()
    /// `[System]`: which of the system's changes the apps follow. Read at start only.
    public var system = SystemSettings()
    /// `[Memory]`: memory pressure, its levels and the file read. Read at start only.
    public var memory = MemorySettings()
    /// `[Journal]` and `[JournalWatch NAME]`: the journal watches.
    public var journal = JournalSettings()

    public init() {}

    /// Turns off every deadline an app or its launch must meet and the background-task budget, as
    /// `coalesced --no-deadlines` does for development: an app stopped in a debugger is never killed for it.
    public mutating func liftDeadlines() {
        self.timings.launchAcknowledgement = nil
        self.timings.backgroundAcknowledgement = nil
        self.timings.backgroundTaskBudget = nil
        self.launchTimeout = nil
    }
}

/// `[Quotas]`: bounds on what apps take, per user (the apps' owner) and in all, so that the daemon's memory is
/// bounded by its configuration whatever clients send. Root, the daemon's own user and members of `AdminGroup=`
/// have quotas of their own.
public struct Quotas: Sendable, Hashable {
    /// `HeldBytes=`: the bytes every app's events may take in memory in all (held, stored and not sent, sent and
    /// not acknowledged).
    public var heldBytes: Int = 256 << 20
    /// `UserHeldBytes=`: what one user's apps' events may take in memory.
    public var userHeldBytes: Int = 16 << 20
    /// `AdminHeldBytes=`: the same for an administrator's apps.
    public var adminHeldBytes: Int = 128 << 20
    /// `UserApps=`: apps one user may register.
    public var userApps: Int = 64
    /// `AdminApps=`: apps an administrator may register.
    public var adminApps: Int = 4096

    public init() {}
}

/// `[Notifications]`: how many requests and delivered entries each app keeps, and the command run for each
/// presentation.
public struct NotificationSettings: Sendable, Hashable {
    /// `PendingLimit=`: requests one app may have pending; one more is refused.
    public var pendingLimit: Int = 64
    /// `LateAfterSec=`: a fire presented later than this after its date was missed (the machine slept, the daemon
    /// was down, the clock was set past it), and its request's late policy applies.
    public var lateAfter: Duration = .seconds(60)
    /// `MaxDelivered=`: entries of one app's delivered list; past it the oldest go, counted.
    public var maxDelivered: Int = 64
    /// `MaxContentSize=`: the bytes a request's content may take (its texts, actions and user info), so that what
    /// one user's apps keep pending and delivered is bounded by this, `PendingLimit=`, `MaxDelivered=` and
    /// `UserApps=`.
    public var maxContentSize: Int = 4 << 10
    /// `Command=`: run for each presentation with its fields in the environment (`COALESCED_APP`, …), through
    /// `/bin/sh -c`; `nil`: none.
    public var command: String?
    /// `CommandTimeoutSec=`: how long a command may run before it is killed.
    public var commandTimeout: Duration = .seconds(10)
    /// `MaxCommands=`: commands running at once; past it presentations wait their turn (the journal has them).
    public var maxCommands: Int = 4
    /// `PresentationBurst=`: presentations the apps of one user make per `PresentationIntervalSec=`; past it the
    /// rest are coalesced per thread and presented when the interval ends (``PresentationRate``). Far above what
    /// a person reads: a morning's reminders due together pass, a loop scheduling notifications does not.
    public var presentationBurst: Int = 20
    /// `PresentationIntervalSec=`: the window `PresentationBurst=` counts in.
    public var presentationInterval: Duration = .seconds(10)

    public init() {}
}

/// `[System]`: the system around the apps that the daemon follows.
public struct SystemSettings: Sendable, Hashable {
    /// `FollowSleep=`: hold a logind delay inhibitor, interrupt the active app before sleep, save, resume after.
    public var followsSleep = true
    /// `FollowLock=`: follow the screen lock of the seat's active session.
    public var followsLock = true
    /// `Seat=`: whose screen lock is followed.
    public var seat = "seat0"
    /// `FollowTimeZone=`: watch /etc/localtime from the start and tell apps of a new zone.
    public var followsTimeZone = true
    /// `FollowLocale=`: tell apps of localed's new locale.
    public var followsLocale = true

    public init() {}

    /// The seat whose lock is followed, if any.
    public var lockSeat: String? { self.followsLock ? self.seat : nil }
}

/// A group named in the configuration, with the id it had when the configuration was read.
public struct AdminGroup: Sendable, Hashable {
    public var name: String
    public var id: UInt32
}

/// A configuration file's text and where it came from, for error messages.
public struct ConfigurationSource: Sendable, Hashable {
    public var path: String
    public var text: String

    public init(path: String, text: String) {
        self.path = path
        self.text = text
    }
}

/// Why a configuration cannot be used, with the file and line to fix.
public struct ConfigurationError: Error, Hashable, CustomStringConvertible {
    public var path: String
    /// 1-based; 0 when the problem is the file as a whole.
    public var line: Int
    public var reason: String

    public init(path: String, line: Int, reason: String) {
        self.path = path
        self.line = line
        self.reason = reason
    }

    public var description: String {
        self.line > 0 ? "\(self.path):\(self.line): \(self.reason)" : "\(self.path): \(self.reason)"
    }
}

extension Configuration {
    /// Reads settings in the systemd style: `[Section]` headers, `Key=Value` lines, `#` and `;` comments, later
    /// assignments overriding earlier ones, and an empty value restoring the default. Sources apply in order, so
    /// pass the main file first and then the drop-ins sorted by file name.
    /// - Throws: ``ConfigurationError`` for the first unknown section, unknown key or bad value, with its line.
    public static func parse(_ sources: [ConfigurationSource]) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration()
        for source in sources {
            var section: String?
            // The name of the `[JournalWatch NAME]` section the lines are in, if they are in one.
            var watchSection: String?
            for (offset, rawLine) in source.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let lineNumber = offset + 1
                func fail(_ reason: String) -> ConfigurationError {
                    ConfigurationError(path: source.path, line: lineNumber, reason: reason)
                }
                // A NUL ends the text wherever it is read as a C string (the journal, a terminal): the line is refused
                // and shown whole, its NULs written out.
                if rawLine.utf8.contains(0) {
                    throw fail("NUL byte in line '\(visible(rawLine))'; a configuration file is text")
                }
                let line = rawLine.trimmingWhitespace()
                if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
                if line.hasPrefix("[") {
                    guard line.hasSuffix("]"), line.count > 2 else { throw fail("malformed section header '\(visible(line))'") }
                    let name = String(line.dropFirst().dropLast())
                    watchSection = nil
                    if name.hasPrefix(Self.watchSectionPrefix) {
                        let watch = String(name.dropFirst(Self.watchSectionPrefix.count)).trimmingWhitespace()
                        do {
                            _ = try WatchName(watch)
                        } catch {
                            throw fail("[JournalWatch \(visible(watch))]: \(error.reason)")
                        }
                        configuration.openWatchSection(watch, path: source.path, line: lineNumber)
                        watchSection = watch
                        section = name
                        continue
                    }
                    guard ConfigurationKey.sections.contains(name) else {
                        throw fail("unknown section [\(visible(name))]; known sections: \(ConfigurationKey.sectionList)")
                    }
                    section = name
                    continue
                }
                guard let equals = line.firstIndex(of: "=") else {
                    throw fail("expected Key=Value, got '\(visible(line))'")
                }
                let key = String(line[..<equals]).trimmingWhitespace()
                let value = String(line[line.index(after: equals)...]).trimmingWhitespace()
                guard let section else { throw fail("assignment to \(visible(key)) outside of any [Section]") }
                if let watchSection {
                    do {
                        try configuration.assign(watch: watchSection, key: key, value: value, path: source.path, line: lineNumber)
                    } catch {
                        throw fail(error.reason)
                    }
                    continue
                }
                guard let setting = ConfigurationKey.all[section]?[key] else {
                    let known = ConfigurationKey.all[section]!.keys.sorted().joined(separator: ", ")  // section is known
                    throw fail("unknown key '\(visible(key))' in [\(section)]; known keys: \(known)")
                }
                do {
                    try setting(&configuration, value)
                } catch {
                    throw fail("bad value '\(visible(value))' for \(key)=: \(error.reason)")
                }
            }
        }
        try configuration.finishWatchSections()
        return configuration
    }

    /// `[JournalWatch NAME]`: a section per journal watch.
    static let watchSectionPrefix = "JournalWatch "

}

/// Why a value does not fit its key.
struct ConfigurationValueError: Error {
    var reason: String
}

/// The keys of each section and how each reads its value.
enum ConfigurationKey {
    typealias Setter = @Sendable (inout Configuration, String) throws(ConfigurationValueError) -> Void

    static let all: [String: [String: Setter]] = [
        "Daemon": [
            "LogLevel": { configuration, value throws(ConfigurationValueError) in
                configuration.logLevel = value.isEmpty ? Configuration().logLevel : try parseLogLevel(value)
            },
            "AdminGroup": { configuration, value throws(ConfigurationValueError) in
                configuration.adminGroup = value.isEmpty ? nil : try resolveGroup(value)
            },
        ],
        "Apps": [
            "MaxApps": { configuration, value throws(ConfigurationValueError) in
                configuration.maxApps =
                    value.isEmpty ? Configuration().maxApps : try parseInteger(value, in: 1...1_000_000)
            },
            "AcknowledgeTimeoutSec": { configuration, value throws(ConfigurationValueError) in
                let timeout = value.isEmpty ? LifecycleTimings().launchAcknowledgement : try parseTimeout(value)
                configuration.timings.launchAcknowledgement = timeout
                configuration.timings.backgroundAcknowledgement = timeout
            },
            "BackgroundTaskBudgetSec": { configuration, value throws(ConfigurationValueError) in
                configuration.timings.backgroundTaskBudget =
                    value.isEmpty ? LifecycleTimings().backgroundTaskBudget : try parseBudget(value)
            },
            "BackgroundTaskWarningSec": { configuration, value throws(ConfigurationValueError) in
                configuration.timings.expiryWarning =
                    value.isEmpty ? LifecycleTimings().expiryWarning : try parseTimeSpan(value, allowZero: true)
            },
            "BackgroundTaskExpiry": { configuration, value throws(ConfigurationValueError) in
                switch value {
                case "", "suspend": configuration.timings.terminateWhenBudgetRunsOut = false
                case "terminate": configuration.timings.terminateWhenBudgetRunsOut = true
                default: throw ConfigurationValueError(reason: "expected suspend or terminate")
                }
            },
            "LaunchTimeoutSec": { configuration, value throws(ConfigurationValueError) in
                configuration.launchTimeout = value.isEmpty ? Configuration().launchTimeout : try parseTimeout(value)
            },
            "TerminateGraceSec": { configuration, value throws(ConfigurationValueError) in
                configuration.terminateGrace =
                    value.isEmpty ? Configuration().terminateGrace : try parseTimeSpan(value, allowZero: true)
            },
            "ExclusiveForeground": { configuration, value throws(ConfigurationValueError) in
                configuration.exclusiveForeground = value.isEmpty ? true : try parseBoolean(value)
            },
            "MaxSavedState": { configuration, value throws(ConfigurationValueError) in
                configuration.maxSavedState =
                    value.isEmpty ? Configuration().maxSavedState : try parseSize(value, in: 0...(16 << 20))
            },
            "Suspension": { configuration, value throws(ConfigurationValueError) in
                guard !value.isEmpty else {
                    configuration.suspension = Configuration().suspension
                    return
                }
                guard let mode = SuspensionMode(rawValue: value) else {
                    throw ConfigurationValueError(reason: "expected \(SuspensionMode.names)")
                }
                configuration.suspension = mode
            },
            "SuspensionDelaySec": { configuration, value throws(ConfigurationValueError) in
                let delay = value.isEmpty ? Configuration().suspensionDelay : try parseTimeSpan(value, allowZero: true)
                guard delay <= .seconds(60) else { throw ConfigurationValueError(reason: "at most 60s") }
                configuration.suspensionDelay = delay
            },
        ],
        "Events": [
            "MaxKindsPerApp": { configuration, value throws(ConfigurationValueError) in
                configuration.maxKindsPerApp =
                    value.isEmpty ? Configuration().maxKindsPerApp : try parseInteger(value, in: 1...100_000)
            },
            "MaxPayloadSize": { configuration, value throws(ConfigurationValueError) in
                configuration.maxPayloadSize =
                    value.isEmpty ? Configuration().maxPayloadSize : try parseSize(value, in: 2...(16 << 20))
            },
        ],
        "Notifications": [
            "PendingLimit": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.pendingLimit =
                    value.isEmpty ? NotificationSettings().pendingLimit : try parseInteger(value, in: 1...1_000_000)
            },
            "LateAfterSec": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.lateAfter =
                    value.isEmpty ? NotificationSettings().lateAfter : try parseTimeSpan(value, allowZero: true)
            },
            "MaxDelivered": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.maxDelivered =
                    value.isEmpty ? NotificationSettings().maxDelivered : try parseInteger(value, in: 1...100_000)
            },
            "MaxContentSize": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.maxContentSize =
                    value.isEmpty ? NotificationSettings().maxContentSize : try parseSize(value, in: 256...(1 << 20))
            },
            "Command": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.command = value.isEmpty ? nil : value
            },
            "CommandTimeoutSec": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.commandTimeout =
                    value.isEmpty ? NotificationSettings().commandTimeout : try parseTimeSpan(value, otherwise: "")
            },
            "MaxCommands": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.maxCommands =
                    value.isEmpty ? NotificationSettings().maxCommands : try parseInteger(value, in: 1...64)
            },
            "PresentationBurst": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.presentationBurst =
                    value.isEmpty ? NotificationSettings().presentationBurst : try parseInteger(value, in: 1...1_000_000)
            },
            "PresentationIntervalSec": { configuration, value throws(ConfigurationValueError) in
                configuration.notifications.presentationInterval =
                    value.isEmpty ? NotificationSettings().presentationInterval : try parseTimeSpan(value, otherwise: "")
            },
        ],
        "Quotas": [
            "HeldBytes": { configuration, value throws(ConfigurationValueError) in
                configuration.quotas.heldBytes =
                    value.isEmpty ? Quotas().heldBytes : try parseSize(value, in: (64 << 10)...(1 << 40))
            },
            "UserHeldBytes": { configuration, value throws(ConfigurationValueError) in
                configuration.quotas.userHeldBytes =
                    value.isEmpty ? Quotas().userHeldBytes : try parseSize(value, in: (4 << 10)...(1 << 40))
            },
            "AdminHeldBytes": { configuration, value throws(ConfigurationValueError) in
                configuration.quotas.adminHeldBytes =
                    value.isEmpty ? Quotas().adminHeldBytes : try parseSize(value, in: (4 << 10)...(1 << 40))
            },
            "UserApps": { configuration, value throws(ConfigurationValueError) in
                configuration.quotas.userApps =
                    value.isEmpty ? Quotas().userApps : try parseInteger(value, in: 1...1_000_000)
            },
            "AdminApps": { configuration, value throws(ConfigurationValueError) in
                configuration.quotas.adminApps =
                    value.isEmpty ? Quotas().adminApps : try parseInteger(value, in: 1...1_000_000)
            },
        ],
        "System": [
            "FollowSleep": { configuration, value throws(ConfigurationValueError) in
                configuration.system.followsSleep = value.isEmpty ? true : try parseBoolean(value)
            },
            "FollowLock": { configuration, value throws(ConfigurationValueError) in
                configuration.system.followsLock = value.isEmpty ? true : try parseBoolean(value)
            },
            "Seat": { configuration, value throws(ConfigurationValueError) in
                let seat = value.isEmpty ? "seat0" : value
                guard seat.hasPrefix("seat"), seat.utf8.count <= 255,
                    seat.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
                else {
                    throw ConfigurationValueError(reason: "'\(value)' is not a seat name: seat0, or seat followed by letters, digits, '-' and '_'")
                }
                configuration.system.seat = seat
            },
            "FollowTimeZone": { configuration, value throws(ConfigurationValueError) in
                configuration.system.followsTimeZone = value.isEmpty ? true : try parseBoolean(value)
            },
            "FollowLocale": { configuration, value throws(ConfigurationValueError) in
                configuration.system.followsLocale = value.isEmpty ? true : try parseBoolean(value)
            },
        ],
        "Memory": memoryKeys,
        "Journal": journalKeys,
        "Varlink": [
            "MaxMessageSize": { configuration, value throws(ConfigurationValueError) in
                configuration.maxMessageSize =
                    value.isEmpty ? Configuration().maxMessageSize : try parseSize(value, in: 4096...(64 << 20))
            },
            "MaxConnections": { configuration, value throws(ConfigurationValueError) in
                configuration.maxConnections =
                    value.isEmpty ? Configuration().maxConnections : try parseInteger(value, in: 1...65536)
            },
            "MaxConnectionsPerUser": { configuration, value throws(ConfigurationValueError) in
                configuration.maxConnectionsPerUser =
                    value.isEmpty ? Configuration().maxConnectionsPerUser : try parseInteger(value, in: 1...65536)
            },
            "ReservedConnections": { configuration, value throws(ConfigurationValueError) in
                configuration.reservedConnections =
                    value.isEmpty ? Configuration().reservedConnections : try parseInteger(value, in: 0...65535)
            },
            "IncompleteMessageTimeoutSec": { configuration, value throws(ConfigurationValueError) in
                configuration.incompleteMessageTimeout =
                    value.isEmpty ? Configuration().incompleteMessageTimeout : try parseTimeSpan(value)
            },
            "EventLoops": { configuration, value throws(ConfigurationValueError) in
                configuration.eventLoops =
                    value.isEmpty ? Configuration().eventLoops : try parseInteger(value, in: 1...64)
            },
        ],
    ]

    static let sections = Set(all.keys)
    static let sectionList = (all.keys + ["JournalWatch NAME"]).sorted().map { "[\($0)]" }.joined(separator: ", ")

    static func parseLogLevel(_ value: String) throws(ConfigurationValueError) -> Logger.Level {
        // systemd's names, plus swift-log's.
        switch value.lowercased() {
        case "trace": return .trace
        case "debug": return .debug
        case "info": return .info
        case "notice": return .notice
        case "warning", "warn": return .warning
        case "err", "error": return .error
        case "crit", "critical", "alert", "emerg": return .critical
        default: throw ConfigurationValueError(reason: "expected debug, info, notice, warning, error or critical")
        }
    }

    static func resolveGroup(_ name: String) throws(ConfigurationValueError) -> AdminGroup {
        guard let group = getgrnam(name) else {
            throw ConfigurationValueError(reason: "no group of that name on this system")
        }
        return AdminGroup(name: name, id: group.pointee.gr_gid)
    }

    static func parseInteger(_ value: String, in range: ClosedRange<Int>) throws(ConfigurationValueError) -> Int {
        guard let number = Int(value) else { throw ConfigurationValueError(reason: "expected a whole number") }
        guard range.contains(number) else {
            throw ConfigurationValueError(reason: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    /// A timeout, as systemd's `TimeoutStartSec=` reads one: a time span, or `infinity` or `0` for none (`nil`).
    static func parseTimeout(_ value: String) throws(ConfigurationValueError) -> Duration? {
        if value == "infinity" { return nil }
        let span = try parseTimeSpan(value, allowZero: true, otherwise: ", or infinity (or 0) for none")
        return span == .zero ? nil : span
    }

    /// A budget: a time span longer than zero, or `infinity` for none (`nil`). Zero is refused rather than read as
    /// none: a budget of nothing would read as "no background time at all".
    static func parseBudget(_ value: String) throws(ConfigurationValueError) -> Duration? {
        if value == "infinity" { return nil }
        return try parseTimeSpan(value, otherwise: ", or infinity for no budget")
    }

    /// A systemd time span: `5`, `5s`, `500ms`, `2min`, `1h 30min`; a bare number is seconds.
    /// - Parameter otherwise: what else the key takes, added to the reasons a value is refused for.
    static func parseTimeSpan(
        _ value: String,
        allowZero: Bool = false,
        otherwise: String = ""
    ) throws(ConfigurationValueError) -> Duration {
        let units: [(suffix: String, nanoseconds: Int64)] = [
            ("usec", 1_000), ("us", 1_000), ("msec", 1_000_000), ("ms", 1_000_000), ("seconds", 1_000_000_000),
            ("second", 1_000_000_000), ("sec", 1_000_000_000), ("s", 1_000_000_000), ("minutes", 60_000_000_000),
            ("minute", 60_000_000_000), ("min", 60_000_000_000), ("m", 60_000_000_000), ("hours", 3_600_000_000_000),
            ("hour", 3_600_000_000_000), ("hr", 3_600_000_000_000), ("h", 3_600_000_000_000),
        ]
        let failure = ConfigurationValueError(reason: "expected a time span such as 5s, 500ms or 2min" + otherwise)
        var total: Int64 = 0
        var rest = Substring(value)
        while true {
            rest = rest.drop { $0 == " " }
            if rest.isEmpty { break }
            let digits = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard let number = Double(digits) else { throw failure }
            rest = rest.dropFirst(digits.count).drop { $0 == " " }
            let word = rest.prefix { $0.isLetter }
            rest = rest.dropFirst(word.count)
            let scale: Int64
            if word.isEmpty {
                scale = 1_000_000_000
            } else if let unit = units.first(where: { $0.suffix == word }) {
                scale = unit.nanoseconds
            } else {
                throw failure
            }
            let nanoseconds = number * Double(scale)
            // The bound is on the whole span: parts each under it could add up past Int64.
            guard nanoseconds < 1e17, total + Int64(nanoseconds) < 100_000_000_000_000_000 else {
                throw ConfigurationValueError(reason: "longer than anything sensible")
            }
            total += Int64(nanoseconds)
        }
        guard allowZero || total > 0 else { throw ConfigurationValueError(reason: "must be longer than zero" + otherwise) }
        return .nanoseconds(total)
    }

    /// systemd's booleans.
    static func parseBoolean(_ value: String) throws(ConfigurationValueError) -> Bool {
        switch value.lowercased() {
        case "1", "yes", "y", "true", "t", "on": return true
        case "0", "no", "n", "false", "f", "off": return false
        default: throw ConfigurationValueError(reason: "expected yes or no")
        }
    }

    /// Bytes with an optional K, M or G suffix (powers of 1024, as systemd reads them).
    static func parseSize(_ value: String, in range: ClosedRange<Int>) throws(ConfigurationValueError) -> Int {
        var digits = Substring(value)
        var multiplier = 1
        switch digits.last?.uppercased() {
        case "K": multiplier = 1 << 10
        case "M": multiplier = 1 << 20
        case "G": multiplier = 1 << 30
        default: break
        }
        if multiplier > 1 { digits = digits.dropLast() }
        guard let number = Int(digits), number >= 0 else {
            throw ConfigurationValueError(reason: "expected a size in bytes, optionally with K, M or G")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow, range.contains(bytes) else {
            throw ConfigurationValueError(reason: "must be between \(range.lowerBound) and \(range.upperBound) bytes")
        }
        return bytes
    }
}

/// Text from a configuration file as an error message quotes it: control characters written out (`\0`, `\x1B`), so
/// that the message shows the whole text, cut nowhere and changing no terminal.
func visible<Text: StringProtocol>(_ text: Text) -> String {
    var shown = ""
    for scalar in text.unicodeScalars {
        switch scalar.value {
        case 0: shown += "\\0"
        case 0x09: shown += "\\t"
        case 0x0D: shown += "\\r"
        case 0x01...0x1F, 0x7F:
            let hex = String(scalar.value, radix: 16, uppercase: true)
            shown += "\\x" + (hex.count < 2 ? "0" + hex : hex)
        default: shown.unicodeScalars.append(scalar)
        }
    }
    return shown
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        String(self.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
