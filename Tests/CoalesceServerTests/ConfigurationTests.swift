import CoalesceCore
import CoalesceServer
import CoalesceTestSupport
import Logging
import Testing

@Suite struct ConfigurationTests {
    private func parse(_ texts: String...) throws(ConfigurationError) -> Configuration {
        try Configuration.parse(texts.enumerated().map { ConfigurationSource(path: "f\($0.offset).conf", text: $0.element) })
    }

    @Test func emptyConfigurationGivesTheDefaults() throws {
        let configuration = try self.parse("")
        #expect(configuration == Configuration())
        #expect(configuration.maxMessageSize == 1 << 20)
        #expect(configuration.logLevel == .info)
    }

    @Test func readsSectionsKeysSizesAndComments() throws {
        let configuration = try self.parse(
            """
            # comment
            ; another
            [Daemon]
            LogLevel = debug

            [Varlink]
            MaxMessageSize=64K
            MaxConnections=12
            MaxConnectionsPerUser=5
            ReservedConnections=3
            IncompleteMessageTimeoutSec=750ms
            EventLoops=2
            """
        )
        #expect(configuration.logLevel == .debug)
        #expect(configuration.maxMessageSize == 65536)
        #expect(configuration.maxConnections == 12)
        #expect(configuration.maxConnectionsPerUser == 5)
        #expect(configuration.reservedConnections == 3)
        #expect(configuration.incompleteMessageTimeout == .milliseconds(750))
        #expect(configuration.eventLoops == 2)
        #expect(try self.parse("").eventLoops == 1)
    }

    @Test func readsTheQuotas() throws {
        let quotas = try self.parse("[Quotas]\nHeldBytes=1G\nUserHeldBytes=8M\nAdminHeldBytes=64M\nUserApps=3\nAdminApps=30\n").quotas
        #expect(quotas.heldBytes == 1 << 30 && quotas.userHeldBytes == 8 << 20 && quotas.adminHeldBytes == 64 << 20)
        #expect(quotas.userApps == 3 && quotas.adminApps == 30)
        #expect(try self.parse("[Quotas]\nUserApps=3\nUserApps=\n").quotas == Quotas(), "an empty value restores the default")
        #expect(throws: ConfigurationError(path: "f0.conf", line: 2, reason: "bad value '1K' for HeldBytes=: must be between 65536 and 1099511627776 bytes")) {
            try self.parse("[Quotas]\nHeldBytes=1K\n")
        }
    }

    @Test func readsThePresentationRate() throws {
        let defaults = try self.parse("").notifications
        #expect(defaults.presentationBurst == 20 && defaults.presentationInterval == .seconds(10))
        let set = try self.parse("[Notifications]\nPresentationBurst=5\nPresentationIntervalSec=1min\n").notifications
        #expect(set.presentationBurst == 5 && set.presentationInterval == .seconds(60))
        #expect(throws: ConfigurationError(path: "f0.conf", line: 2, reason: "bad value '0' for PresentationBurst=: must be between 1 and 1000000")) {
            try self.parse("[Notifications]\nPresentationBurst=0\n")
        }
        #expect(throws: ConfigurationError.self) { try self.parse("[Notifications]\nPresentationIntervalSec=0\n") }
    }

    @Test func readsWhichOfTheSystemsChangesAreFollowed() throws {
        #expect(try self.parse("").system.lockSeat == "seat0")
        let system = try self.parse("[System]\nFollowSleep=no\nFollowLock=no\nSeat=seat1\nFollowTimeZone=no\nFollowLocale=no\n").system
        #expect(!system.followsSleep && system.lockSeat == nil && !system.followsTimeZone && !system.followsLocale)
        #expect(try self.parse("[System]\nFollowLock=no\nSeat=seat1\nFollowLock=yes\n").system.lockSeat == "seat1")
        #expect(throws: ConfigurationError(path: "f0.conf", line: 2, reason: "bad value 'tty1' for Seat=: 'tty1' is not a seat name: seat0, or seat followed by letters, digits, '-' and '_'")) {
            try self.parse("[System]\nSeat=tty1\n")
        }
    }

    @Test func readsTheLifecycleAndEventSettings() throws {
        let configuration = try self.parse(
            """
            [Apps]
            AcknowledgeTimeoutSec=1min 30s
            BackgroundTaskBudgetSec=2h
            BackgroundTaskWarningSec=500ms
            BackgroundTaskExpiry=terminate
            LaunchTimeoutSec=7
            TerminateGraceSec=0
            ExclusiveForeground=no
            MaxSavedState=1K
            Suspension=cooperative
            SuspensionDelaySec=1.5s
            [Events]
            MaxKindsPerApp=3
            MaxPayloadSize=2K
            """
        )
        #expect(configuration.timings.launchAcknowledgement == .seconds(90))
        #expect(configuration.timings.backgroundAcknowledgement == .seconds(90))
        #expect(configuration.timings.backgroundTaskBudget == .seconds(7200))
        #expect(configuration.timings.expiryWarning == .milliseconds(500))
        #expect(configuration.timings.terminateWhenBudgetRunsOut)
        #expect(configuration.launchTimeout == .seconds(7))
        #expect(configuration.terminateGrace == .zero)
        #expect(!configuration.exclusiveForeground)
        #expect(configuration.maxSavedState == 1024)
        #expect(configuration.suspension == .cooperative)
        #expect(configuration.suspensionDelay == .milliseconds(1500))
        #expect(Configuration().suspension == .freeze, "real suspension unless an operator chooses otherwise")
        #expect(Configuration().suspensionDelay == .milliseconds(200))
        #expect(configuration.maxKindsPerApp == 3)
        #expect(configuration.maxPayloadSize == 2048)
    }

    @Test func laterFilesOverrideEarlierOnesAndEmptyRestoresTheDefault() throws {
        let configuration = try self.parse(
            "[Varlink]\nMaxMessageSize=2M\nMaxConnections=10\n",
            "[Varlink]\nMaxMessageSize=4M\n",
            "[Varlink]\nMaxConnections=\n"
        )
        #expect(configuration.maxMessageSize == 4 << 20)
        #expect(configuration.maxConnections == Configuration().maxConnections)
    }

    @Test(arguments: [
        ("[Nope]\n", "f0.conf:1: unknown section [Nope]; known sections: [Apps], [Daemon], [Events], [Journal], [JournalWatch NAME], [Memory], [Notifications], [Quotas], [Refresh], [System], [Varlink]"),
        (
            "[Apps]\nAcknowledgeTimeoutSec=soon\n",
            "f0.conf:2: bad value 'soon' for AcknowledgeTimeoutSec=: expected a time span such as 5s, 500ms or 2min, or infinity (or 0) for none"
        ),
        (
            "[Apps]\nBackgroundTaskBudgetSec=0\n",
            "f0.conf:2: bad value '0' for BackgroundTaskBudgetSec=: must be longer than zero, or infinity for no budget"
        ),
        (
            "[Apps]\nBackgroundTaskWarningSec=infinity\n",
            "f0.conf:2: bad value 'infinity' for BackgroundTaskWarningSec=: expected a time span such as 5s, 500ms or 2min"
        ),
        ("[Apps]\nBackgroundTaskExpiry=never\n", "f0.conf:2: bad value 'never' for BackgroundTaskExpiry=: expected suspend or terminate"),
        ("[Apps]\nExclusiveForeground=maybe\n", "f0.conf:2: bad value 'maybe' for ExclusiveForeground=: expected yes or no"),
        ("[Apps]\nSuspension=sleep\n", "f0.conf:2: bad value 'sleep' for Suspension=: expected freeze, stop, cooperative"),
        ("[Apps]\nSuspensionDelaySec=2min\n", "f0.conf:2: bad value '2min' for SuspensionDelaySec=: at most 60s"),
        ("[Varlink]\nMaxMessages=3\n", "f0.conf:2: unknown key 'MaxMessages' in [Varlink]; known keys: EventLoops, IncompleteMessageTimeoutSec, MaxConnections, MaxConnectionsPerUser, MaxMessageSize, ReservedConnections"),
        ("[Varlink]\nEventLoops=0\n", "f0.conf:2: bad value '0' for EventLoops=: must be between 1 and 64"),
        ("\n\n[Varlink]\nMaxMessageSize=lots\n", "f0.conf:4: bad value 'lots' for MaxMessageSize=: expected a size in bytes, optionally with K, M or G"),
        ("[Varlink]\nMaxMessageSize=1K\n", "f0.conf:2: bad value '1K' for MaxMessageSize=: must be between 4096 and 67108864 bytes"),
        ("[Varlink]\nMaxConnections=0\n", "f0.conf:2: bad value '0' for MaxConnections=: must be between 1 and 65536"),
        ("[Daemon]\nLogLevel=loud\n", "f0.conf:2: bad value 'loud' for LogLevel=: expected debug, info, notice, warning, error or critical"),
        ("LogLevel=debug\n", "f0.conf:1: assignment to LogLevel outside of any [Section]"),
        ("[Daemon]\nLogLevel\n", "f0.conf:2: expected Key=Value, got 'LogLevel'"),
        ("[Daemon\n", "f0.conf:1: malformed section header '[Daemon'"),
        ("[Apps]\nMaxApps=5\u{0}x\n", #"f0.conf:2: NUL byte in line 'MaxApps=5\0x'; a configuration file is text"#),
        ("[Apps]\n# a comment\u{0}\n", #"f0.conf:2: NUL byte in line '# a comment\0'; a configuration file is text"#),
        ("[Ap\u{0}ps]\n", #"f0.conf:1: NUL byte in line '[Ap\0ps]'; a configuration file is text"#),
        (
            "[Daemon]\nLogLevel=\u{1B}[31mred\n",
            #"f0.conf:2: bad value '\x1B[31mred' for LogLevel=: expected debug, info, notice, warning, error or critical"#
        ),
    ])
    func errorsNameTheFileAndLine(text: String, message: String) {
        #expect {
            try self.parse(text)
        } throws: { error in
            (error as? ConfigurationError)?.description == message
        }
    }

    @Test func readsTheMemoryPressureLevels() throws {
        let defaults = try self.parse("")
        #expect(defaults.memory.enabled)
        #expect(defaults.memory.warning == StallThreshold(.some, stall: .milliseconds(70), window: .seconds(2)))
        #expect(defaults.memory.critical == StallThreshold(.full, stall: .milliseconds(100), window: .seconds(2)))
        #expect(defaults.memory.path == "/proc/pressure/memory")
        let configured = try self.parse(
            """
            [Memory]
            Warning=some  150ms   1s
            Critical=full 60% 10s
            PressureFile=/sys/fs/cgroup/app.slice/memory.pressure
            """
        )
        #expect(configured.memory.warning == StallThreshold(.some, stall: .milliseconds(150), window: .seconds(1)))
        #expect(configured.memory.critical == StallThreshold(.full, stall: .seconds(6), window: .seconds(10)))
        #expect(configured.memory.critical.triggerText == "full 6000000 10000000")
        #expect(configured.memory.path == "/sys/fs/cgroup/app.slice/memory.pressure")
        let off = try self.parse("[Memory]\nPressure=no\n", "[Memory]\nWarning=\n")
        #expect(!off.memory.enabled)
        #expect(off.memory.warning == defaults.memory.warning)
    }

    @Test(arguments: [
        ("Warning=some 70ms", "expected some or full, a stall and a window, such as 'some 70ms 2s' or 'full 60% 10s'"),
        ("Warning=most 70ms 2s", "'most' is not a kind of stall: expected some (at least one task stalled) or full (every task stalled)"),
        ("Critical=full 100ms 20s", "the window must be from 500ms to 10s, as the kernel's triggers take it"),
        ("Critical=full 100ms 100ms", "the window must be from 500ms to 10s, as the kernel's triggers take it"),
        ("Critical=full 3s 2s", "the stall cannot be longer than its window"),
        ("Critical=full 0% 2s", "a share of the window must be more than 0% and at most 100%"),
        ("Warning=some 0 2s", "must be longer than zero for the stall, or a share of the window such as 60%"),
        ("PressureFile=memory.pressure", "expected an absolute path, such as /sys/fs/cgroup/system.slice/memory.pressure"),
        ("Pressure=sometimes", "expected yes or no"),
    ])
    func memoryErrorsSayWhy(line: String, reason: String) {
        let key = line.prefix { $0 != "=" }
        let value = line.drop { $0 != "=" }.dropFirst()
        #expect {
            try self.parse("[Memory]\n\(line)\n")
        } throws: { error in
            (error as? ConfigurationError)?.description == "f0.conf:2: bad value '\(value)' for \(key)=: \(reason)"
        }
    }

    /// systemd's convention for time spans: `infinity` is none, and for a timeout `0` is none too (as
    /// `TimeoutStartSec=0`); a drop-in's empty value restores the finite default.
    @Test func deadlinesTakeInfinityAndTimeoutsTakeZeroForNone() throws {
        let off = try self.parse("[Apps]\nAcknowledgeTimeoutSec=infinity\nBackgroundTaskBudgetSec=infinity\nLaunchTimeoutSec=0\n")
        #expect(off.timings.launchAcknowledgement == nil)
        #expect(off.timings.backgroundAcknowledgement == nil)
        #expect(off.timings.backgroundTaskBudget == nil)
        #expect(off.launchTimeout == nil)
        #expect(try self.parse("[Apps]\nAcknowledgeTimeoutSec=0\nLaunchTimeoutSec=infinity\n").timings.launchAcknowledgement == nil)
        let restored = try self.parse(
            "[Apps]\nAcknowledgeTimeoutSec=infinity\nLaunchTimeoutSec=infinity\n",
            "[Apps]\nAcknowledgeTimeoutSec=\nLaunchTimeoutSec=\n"
        )
        #expect(restored.timings.launchAcknowledgement == .seconds(5))
        #expect(restored.launchTimeout == .seconds(10))
    }

    @Test func liftingDeadlinesTurnsOffEveryDeadlineAndTheBudgetAndNothingElse() throws {
        var configuration = try self.parse("[Apps]\nAcknowledgeTimeoutSec=1s\nTerminateGraceSec=2s\nBackgroundTaskWarningSec=1s\n")
        configuration.liftDeadlines()
        var expected = Configuration()
        expected.timings.launchAcknowledgement = nil
        expected.timings.backgroundAcknowledgement = nil
        expected.timings.backgroundTaskBudget = nil
        expected.timings.expiryWarning = .seconds(1)
        expected.launchTimeout = nil
        expected.terminateGrace = .seconds(2)
        #expect(configuration == expected)
    }

    @Test func errorInADropInNamesTheDropIn() {
        #expect {
            try self.parse("[Daemon]\nLogLevel=info\n", "[Daemon]\nLogLevel=nope\n")
        } throws: { error in
            (error as? ConfigurationError)?.path == "f1.conf" && (error as? ConfigurationError)?.line == 2
        }
    }

    @Test func loaderReadsDropInsInFileNameOrder() throws {
        let directory = try TemporaryDirectory()
        try directory.write("coalesced.conf", "[Varlink]\nMaxConnections=1\n")
        try directory.write("coalesced.conf.d/20-b.conf", "[Varlink]\nMaxConnections=20\n")
        try directory.write("coalesced.conf.d/10-a.conf", "[Varlink]\nMaxConnections=10\nMaxMessageSize=8K\n")
        try directory.write("coalesced.conf.d/30-ignored.conf.disabled", "[Varlink]\nMaxConnections=30\n")
        let configuration = try ConfigurationLoader.load(path: directory.file("coalesced.conf"), required: true)
        #expect(configuration.maxConnections == 20)
        #expect(configuration.maxMessageSize == 8192)
    }

    @Test func missingFileIsFineUnlessItWasNamed() throws {
        let directory = try TemporaryDirectory()
        #expect(try ConfigurationLoader.load(path: directory.file("none.conf"), required: false) == Configuration())
        #expect {
            try ConfigurationLoader.load(path: directory.file("none.conf"), required: true)
        } throws: { error in
            (error as? ConfigurationError)?.description == "\(directory.file("none.conf")): cannot read: No such file or directory"
        }
    }

    /// A span of parts each under the bound once added up past Int64 and trapped (Fuzz/Corpus/FuzzConfiguration/
    /// long-time-span holds the input).
    @Test func aTimeSpanIsBoundedAsAWhole() {
        let span = Array(repeating: "99999999s", count: 100).joined(separator: " ")
        #expect {
            try self.parse("[Apps]\nBackgroundTaskBudgetSec=\(span)\n")
        } throws: { error in
            (error as? ConfigurationError)?.reason.hasSuffix("longer than anything sensible") == true
        }
    }
}
