public import CoalesceCore
public import Logging

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
    /// `[Refresh]`: the budgets background refreshes get.
    public var refresh = RefreshSettings()

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
/// `[Refresh]`: what background refreshes may ask for, published (Stats, coalescectl status), not secret.
public struct RefreshSettings: Sendable, Hashable {
    /// The longest budget a run may ask for, and the budget of one that asks for none (`MaxBudgetSec=`).
    public var maxBudget: Duration = .seconds(30)
    /// The shortest period a repeating refresh may ask for (`MinIntervalSec=`).
    public var minInterval: Duration = .seconds(900)
    /// How many refreshes an app may have scheduled at once (`MaxRefreshes=`).
    public var maxPerApp = 16

    public init() {}
}

public struct SystemSettings: Sendable, Hashable {
    /// `FollowSleep=`: hold a logind delay inhibitor, interrupt the active app before sleep, save, resume after.
    public var followsSleep = true
    /// `FollowLock=`: follow the screen lock of the seat's active session.
    public var followsLock = true
    /// `LockInterrupts=`: the lock interrupts the apps on screen (willResignActive … didBecomeActive), as sleep does.
    public var lockInterrupts = true
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
