import CoalesceCore
import Logging
import Systemd

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
            "FailedLaunchLimit": { configuration, value throws(ConfigurationValueError) in
                switch value {
                case "": configuration.timings.failedLaunchLimit = LifecycleTimings().failedLaunchLimit
                case "infinity": configuration.timings.failedLaunchLimit = nil
                default: configuration.timings.failedLaunchLimit = try parseInteger(value, in: 1...1_000)
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
            "LockInterrupts": { configuration, value throws(ConfigurationValueError) in
                configuration.system.lockInterrupts = value.isEmpty ? true : try parseBoolean(value)
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
        "Refresh": [
            "MaxBudgetSec": { configuration, value throws(ConfigurationValueError) in
                let budget = value.isEmpty ? RefreshSettings().maxBudget : try parseTimeSpan(value, allowZero: false)
                guard budget <= .seconds(600) else { throw ConfigurationValueError(reason: "at most 10min") }
                configuration.refresh.maxBudget = budget
            },
            "MinIntervalSec": { configuration, value throws(ConfigurationValueError) in
                configuration.refresh.minInterval =
                    value.isEmpty ? RefreshSettings().minInterval : try parseTimeSpan(value, allowZero: false)
            },
            "MaxRefreshes": { configuration, value throws(ConfigurationValueError) in
                configuration.refresh.maxPerApp = value.isEmpty ? RefreshSettings().maxPerApp : try parseInteger(value, in: 1...1024)
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
        guard let id = UserDatabase.groupID(named: name) else {
            throw ConfigurationValueError(reason: "no group of that name on this system")
        }
        return AdminGroup(name: name, id: id)
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
