import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// `coalescectl watch add|list|remove` and the journal's line in `coalescectl status`, against the real daemon. The
/// host has no journald: the watches are added, listed, kept and removed; the reader finds no entries.
@Suite struct WatchCtlTests {
    /// A configured watch, which RemoveWatch refuses to remove.
    static let configuration = "[JournalWatch cfg]\nUnit=cron.service\nKind=cron.log\nTo=org.example.mail\n"

    func ctl(_ daemon: DaemonProcess, _ arguments: [String]) async throws -> Run {
        let socket = daemon.socketPath
        return try await onThread { try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", socket] + arguments) }
    }

    /// A daemon with the configured watch and org.example.mail registered.
    func daemonWithApp() async throws -> DaemonProcess {
        let daemon = try DaemonProcess(configuration: Self.configuration)
        try await onThread { try daemon.waitUntilReady() }
        let registered = try await self.ctl(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.mail"}"#])
        #expect(registered.status == 0, "\(registered.stderr)")
        return daemon
    }

    static let added = [
        "watch", "add", "nginx-errors", "--unit", "nginx.service", "--unit", "php-fpm.service", "--user-unit", "web.service",
        "--identifier", "nginx", "--priority", "err", "--match", "_TRANSPORT=journal", "--match", "_TRANSPORT=syslog",
        "--grep", "fail(ed|ure)", "--kind", "server.error", "--to", "org.example.mail", "--policy", "count",
        "--field", "MESSAGE", "--field", "_PID", "--start", "head",
    ]

    /// The definition `added` makes, as ListWatches returns it.
    func expectAddedDefinition(_ watch: JSONValue?) {
        #expect(watch?["name"] == "nginx-errors")
        #expect(watch?["units"] == ["nginx.service", "php-fpm.service"])
        #expect(watch?["userUnits"] == ["web.service"])
        #expect(watch?["identifiers"] == ["nginx"])
        #expect(watch?["priority"] == "err")
        #expect(watch?["matches"] == ["_TRANSPORT=journal", "_TRANSPORT=syslog"])
        #expect(watch?["grep"] == "fail(ed|ure)")
        #expect(watch?["contains"] == nil)
        #expect(watch?["kind"] == "server.error")
        #expect(watch?["to"] == "org.example.mail")
        #expect(watch?["policy"] == "count")
        #expect(watch?["fields"] == ["MESSAGE", "_PID"])
        #expect(watch?["origin"] == "runtime")
        #expect(watch?["owner"] == 0)
        #expect(watch?["matched"] == 0 && watch?["posts"] == 0 && watch?["refused"] == 0)
    }

    @Test func aWatchAddedIsListedKeptAcrossARestartAndRemoved() async throws {
        var daemon = try await self.daemonWithApp()
        let added = try await self.ctl(daemon, Self.added)
        #expect(added.status == 0 && added.stdout == "added\n" && added.stderr.isEmpty, "\(added.stderr)")

        let table = try await self.ctl(daemon, ["watch", "list"])
        #expect(table.status == 0, "\(table.stderr)")
        let lines = table.stdout.split(separator: "\n", omittingEmptySubsequences: false).map { $0.split(separator: " ").map(String.init) }
        #expect(lines.first == ["NAME", "ORIGIN", "TARGET", "KIND", "POLICY", "MATCHED", "POSTS", "REFUSED", "UNTESTED", "LAST"], "\(table.stdout)")
        #expect(lines.count == 6, "header, two rows, a blank line, the summary: \(table.stdout)")
        #expect(lines.dropFirst().first == ["cfg", "configuration", "org.example.mail", "cron.log", "latest", "0", "0", "0", "0", "-"], "the configuration's first")
        #expect(lines.dropFirst(2).first == ["nginx-errors", "runtime", "org.example.mail", "server.error", "count", "0", "0", "0", "0", "-"])
        #expect(table.stdout.hasSuffix("\n\n2 watches listed.\n"), "\(table.stdout)")

        let rows = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(rows.stdout.split(separator: "\n").map { $0.split(separator: " ").first } == ["cfg", "nginx-errors"], "\(rows.stdout)")

        let json = try await self.ctl(daemon, ["watch", "list", "--json"])
        #expect(json.status == 0 && json.stdout.split(separator: "\n").count == 1, "one line: \(json.stdout)")
        let watches = try JSONParser.parse(json.stdout)["watches"]?.arrayValue ?? []
        #expect(watches.count == 2)
        #expect(watches.first?["name"] == "cfg" && watches.first?["origin"] == "configuration" && watches.first?["units"] == ["cron.service"])
        self.expectAddedDefinition(watches.last)

        // Kept in the store: a daemon that takes over has it, from the start.
        daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(configuration: Self.configuration) }
        let kept = try JSONParser.parse(try await self.ctl(daemon, ["-o", "json", "watch", "list"]).stdout)["watches"]?.arrayValue ?? []
        #expect(kept.map { $0["name"] } == ["cfg", "nginx-errors"])
        self.expectAddedDefinition(kept.last)

        let removed = try await self.ctl(daemon, ["watch", "remove", "nginx-errors"])
        #expect(removed.status == 0 && removed.stdout == "removed\n", "\(removed.stderr)")
        let left = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(left.stdout.split(separator: "\n").map { $0.split(separator: " ").first } == ["cfg"], "\(left.stdout)")

        let again = try await self.ctl(daemon, ["watch", "remove", "nginx-errors"])
        #expect(again.status == 1)
        #expect(
            again.stderr == "coalescectl: the daemon answered with an error: io.coalesced.System.NoSuchWatch "
                + #"{"reason":"no watch has that name","watch":"nginx-errors"}"# + "\n",
            "\(again.stderr)"
        )
        // Removed for good: not back after a restart.
        daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(configuration: Self.configuration) }
        let afterRestart = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(afterRestart.stdout.split(separator: "\n").map { $0.split(separator: " ").first } == ["cfg"], "\(afterRestart.stdout)")
        daemon.signal(SIGKILL)
    }

    @Test func refusalsAreOneLineSayingWhatIsWrong() async throws {
        let daemon = try await self.daemonWithApp()
        func refusal(_ arguments: [String]) async throws -> String {
            let run = try await self.ctl(daemon, ["watch", "add", "w"] + arguments)
            #expect(run.status == 1, "\(arguments): \(run.stdout)")
            #expect(run.stdout.isEmpty && run.stderr.split(separator: "\n").count == 1, "one line: \(run.stderr)")
            #expect(run.stderr.hasPrefix("coalescectl: the daemon answered with an error: "), "\(run.stderr)")
            return run.stderr
        }
        let unknownTarget = try await refusal(["--kind", "k", "--to", "org.example.absent"])
        #expect(unknownTarget.contains("io.coalesced.System.InvalidWatch"), "\(unknownTarget)")
        #expect(unknownTarget.contains("no app org.example.absent is registered"), "\(unknownTarget)")
        #expect(unknownTarget.contains(#""watch":"w""#), "\(unknownTarget)")

        let noTopic = try await refusal(["--kind", "k", "--to", "topic:nobody-subscribes"])
        #expect(noTopic.contains("no app subscribes to topic:nobody-subscribes"), "\(noTopic)")

        let badRegex = try await refusal(["--kind", "k", "--to", "org.example.mail", "--grep", "("])
        #expect(badRegex.contains("io.coalesced.System.InvalidWatch") && badRegex.contains("the regular expression /(/ cannot be used"), "\(badRegex)")

        // What a pattern costs is bounded by PCRE2's limits: 26 bytes of nested repetitions, which would take glibc
        // gigabytes, are too large to compile.
        let residentBefore = daemon.residentKiB ?? 0
        for (pattern, words) in [
            ("((a{1,100}){1,100}){1,100}", "regular expression is too large"), ("(|){,2}{2,}{8}", "quantifier does not follow a repeatable item"),
            ("\\C", "is disabled by the application"),
        ] {
            let costly = try await refusal(["--kind", "k", "--to", "org.example.mail", "--grep", pattern])
            #expect(costly.contains("io.coalesced.System.InvalidWatch") && costly.contains(words), "\(costly)")
        }
        #expect((daemon.residentKiB ?? 0) - residentBefore < 64 << 10, "the daemon compiled none of them")
        #expect(try await self.ctl(daemon, ["watch", "list", "--no-legend"]).stdout.split(separator: "\n").count == 1, "none is listed")

        let priority = try await refusal(["--kind", "k", "--to", "org.example.mail", "--priority", "loud"])
        #expect(priority.contains("priority 'loud' is not one of emerg, alert, crit, err, warning, notice, info, debug or 0-7"), "\(priority)")

        let policy = try await refusal(["--kind", "k", "--to", "org.example.mail", "--policy", "lastest"])
        #expect(policy.contains("io.coalesced.System.InvalidWatch") && policy.contains("policy: 'lastest' is not a policy"), "\(policy)")

        let match = try await refusal(["--kind", "k", "--to", "org.example.mail", "--match", "=x"])
        #expect(match.contains("the match '=x' is not FIELD=value"), "\(match)")

        let badName = try await self.ctl(daemon, ["watch", "add", "bad name", "--kind", "k", "--to", "org.example.mail"])
        #expect(badName.status == 1 && badName.stderr.contains("a watch's name is 1 to 64 letters, digits"), "\(badName.stderr)")

        let start = try await refusal(["--kind", "k", "--to", "org.example.mail", "--start", "yesterday"])
        #expect(start.contains("org.varlink.service.InvalidParameter") && start.contains("expected tail, head, cursor=CURSOR"), "\(start)")
        // A time past what microseconds since the epoch hold is refused, not the daemon's end.
        for far in ["since=1e300", "since=inf", "since=-1"] {
            let refused = try await refusal(["--kind", "k", "--to", "org.example.mail", "--start", far])
            #expect(refused.contains("org.varlink.service.InvalidParameter") && refused.contains("before 1e11"), "\(refused)")
        }
        let fields = try await refusal(["--kind", "k", "--to", "org.example.mail", "--field", "MESSAGE", "--field", "MESSAGE"])
        #expect(fields.contains("a field is named twice"), "\(fields)")

        // None of those was taken.
        let none = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(none.stdout.split(separator: "\n").map { $0.split(separator: " ").first } == ["cfg"], "\(none.stdout)")

        let first = try await self.ctl(daemon, ["watch", "add", "w", "--kind", "k", "--to", "org.example.mail", "--contains", "oops"])
        #expect(first.status == 0, "\(first.stderr)")
        let taken = try await refusal(["--kind", "other", "--to", "org.example.mail"])
        #expect(taken == "coalescectl: the daemon answered with an error: io.coalesced.System.WatchExists {\"watch\":\"w\"}\n", "\(taken)")
        let configuredName = try await self.ctl(daemon, ["watch", "add", "cfg", "--kind", "k", "--to", "org.example.mail"])
        #expect(configuredName.status == 1 && configuredName.stderr.contains(#"io.coalesced.System.WatchExists {"watch":"cfg"}"#))

        let configured = try await self.ctl(daemon, ["watch", "remove", "cfg"])
        #expect(configured.status == 1 && configured.stderr.split(separator: "\n").count == 1)
        #expect(
            configured.stderr.contains("io.coalesced.System.NoSuchWatch")
                && configured.stderr.contains("it is the configuration's: remove its [JournalWatch cfg] section and reload"),
            "\(configured.stderr)"
        )

        // Usage errors are coalescectl's own, before any call.
        let both = try await self.ctl(daemon, ["watch", "add", "x", "--kind", "k", "--to", "org.example.mail", "--grep", "a", "--contains", "b"])
        #expect(both.status == 64 && both.stderr.contains("--grep and --contains exclude each other: give one"), "\(both.stderr)")
        let noTarget = try await self.ctl(daemon, ["watch", "add", "x", "--kind", "k"])
        #expect(noTarget.status == 64 && noTarget.stderr.contains("Missing expected argument '--to <target>'"), "\(noTarget.stderr)")
        daemon.signal(SIGKILL)
    }

    @Test func statusShowsTheJournalAlignedAndInJSON() async throws {
        let daemon = try await self.daemonWithApp()
        #expect(try await self.ctl(daemon, ["watch", "add", "w", "--kind", "k", "--to", "org.example.mail"]).status == 0)
        let human = try await self.ctl(daemon, ["status"])
        #expect(human.status == 0, "\(human.stderr)")
        let lines = human.stdout.split(separator: "\n")
        let journal = lines.first { $0.hasPrefix("        Journal: ") }
        #expect(journal?.contains(", 2 watches") == true, "\(human.stdout)")
        #expect(
            journal?.hasPrefix("        Journal: followed, 2 watches; 0 entries read, 0 matched, 0 posts; lag ") == true
                || journal?.hasPrefix("        Journal: not followed") == true,
            "\(human.stdout)"
        )
        #expect(Set(lines.map { line in line.firstIndex(of: ":").map { line.distance(from: line.startIndex, to: $0) } }).count == 1, "colons align")

        let json = try JSONParser.parse(try await self.ctl(daemon, ["status", "--json"]).stdout)["stats"]?["journal"]
        #expect(json?["watches"] == 2, "\(String(describing: json))")
        #expect(json?["followed"]?.boolValue != nil)
        daemon.signal(SIGKILL)

        // With Follow=no the watches are kept, and not read.
        let unfollowed = try DaemonProcess(configuration: "[Journal]\nFollow=no\n" + Self.configuration)
        try await onThread { try unfollowed.waitUntilReady() }
        let off = try await self.ctl(unfollowed, ["status"])
        #expect(off.stdout.split(separator: "\n").contains("        Journal: not followed ([Journal] Follow=no), 1 watch"), "\(off.stdout)")
        unfollowed.signal(SIGKILL)
    }

    /// coalescectl talking to `daemon` as nobody, who is no administrator.
    func asNobody(_ daemon: DaemonProcess, _ arguments: [String]) async throws -> Run {
        try await onThread { try coalescectlAsNobody(daemon, arguments) }
    }

    @Test func watchesAreForAdministratorsOnly() async throws {
        let daemon = try await self.daemonWithApp()
        let permission = "coalescectl: the daemon answered with an error: org.varlink.service.PermissionDenied: this is for root, "
            + "the daemon's own user and members of the group set by AdminGroup= in coalesced.conf\n"
        for arguments in [
            ["watch", "add", "w", "--kind", "k", "--to", "org.example.mail"], ["watch", "list"], ["watch", "remove", "cfg"],
        ] {
            let run = try await self.asNobody(daemon, arguments)
            #expect(run.status == 1 && run.stderr == permission, "\(arguments): \(run.stderr)")
        }
        let listed = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(listed.stdout.split(separator: "\n").map { $0.split(separator: " ").first } == ["cfg"], "nothing added: \(listed.stdout)")
        daemon.signal(SIGKILL)
    }

    /// With `[Journal] UserWatches=`, a user who is no administrator adds watches of its own entries to its own
    /// apps, up to that many, and sees and removes only those; the watch takes `_UID=` of the user whatever it
    /// asked.
    @Test func aUserMayWatchItsOwnEntriesWhereTheConfigurationLetsUsers() async throws {
        let daemon = try DaemonProcess(configuration: Self.configuration + "[Journal]\nUserWatches=2\n")
        try await onThread { try daemon.waitUntilReady() }
        #expect(try await self.ctl(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.mail"}"#]).status == 0)
        let registered = try await self.asNobody(daemon, ["call", "io.coalesced.App.Register", #"{"name":"org.example.nobody"}"#])
        #expect(registered.status == 0, "\(registered.stderr)")
        let uid = try #require(getpwnam("nobody")).pointee.pw_uid

        let added = try await self.asNobody(daemon, ["watch", "add", "mine", "--identifier", "cron", "--kind", "k.mine", "--to", "org.example.nobody"])
        #expect(added.status == 0, "\(added.stderr)")
        let listed = try JSONParser.parse(try await self.asNobody(daemon, ["watch", "list", "--json"]).stdout)
        let watches = listed.arrayValue ?? listed["watches"]?.arrayValue ?? []
        #expect(watches.compactMap { $0["name"]?.stringValue } == ["mine"], "only its own: \(listed)")
        #expect(watches.first?["matches"] == .array([.string("_UID=\(uid)")]), "its own entries: \(listed)")
        #expect(watches.first?["owner"]?.intValue == Int64(uid))

        for (arguments, reason) in [
            (["watch", "add", "theirs", "--kind", "k", "--to", "org.example.mail"], "is not one of uid \(uid)'s"),
            (["watch", "add", "topic", "--kind", "k", "--to", "topic:news"], "is not one of uid \(uid)'s"),
            (["watch", "add", "root", "--match", "_UID=0", "--kind", "k", "--to", "org.example.nobody"], "takes its own entries only"),
            // 64 values pass the bound alone; with the _UID= the user's watch takes, they would be stored and then
            // refused at the next start.
            (["watch", "add", "full"] + (1...64).flatMap { ["--identifier", "i\($0)"] } + ["--kind", "k", "--to", "org.example.nobody"],
             "65 match values"),
        ] {
            let refused = try await self.asNobody(daemon, arguments)
            #expect(refused.status == 1 && refused.stderr.contains(reason), "\(arguments): \(refused.stderr)")
        }
        #expect(try await self.asNobody(daemon, ["watch", "add", "second", "--kind", "k", "--to", "org.example.nobody"]).status == 0)
        let third = try await self.asNobody(daemon, ["watch", "add", "third", "--kind", "k", "--to", "org.example.nobody"])
        #expect(third.stderr.contains("has UserWatches=2 watches already"), "\(third.stderr)")
        let others = try await self.asNobody(daemon, ["watch", "remove", "cfg"])
        #expect(others.stderr.contains("NoSuchWatch"), "\(others.stderr)")
        #expect(try await self.asNobody(daemon, ["watch", "remove", "second"]).status == 0)
        let all = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(all.stdout.split(separator: "\n").map { String($0.split(separator: " ").first ?? "") } == ["cfg", "mine"], "\(all.stdout)")
        daemon.signal(SIGKILL)
    }

    /// The bash completion completes `watch remove` with the daemon's watch names.
    @Test func bashCompletionCompletesWatchNamesFromTheDaemon() async throws {
        let daemon = try await self.daemonWithApp()
        for name in ["mail-errors", "mail-warnings", "disk"] {
            #expect(try await self.ctl(daemon, ["watch", "add", name, "--kind", "k", "--to", "org.example.mail"]).status == 0)
        }
        let ctl = BuildProducts.path(of: "coalescectl")
        let completion = try await onThread { try BashCompletion() }
        func complete(_ words: [String]) async throws -> [String] { try await onThread { try completion.complete(words) } }
        let socket = daemon.socketPath
        #expect(try await complete([ctl, "watch", "remove", "--socket", socket, "mail-"]) == ["mail-errors", "mail-warnings"])
        #expect(try await complete([ctl, "--socket", socket, "watch", "remove", ""]) == ["cfg", "disk", "mail-errors", "mail-warnings"])
        #expect(try await complete([ctl, "--socket", socket, "watch", "add", "w", "--to", "org.example.m"]) == ["org.example.mail"])
        daemon.signal(SIGKILL)
    }

    /// A reload whose watches cannot be taken (an unknown target, a regular expression too long, an unknown field
    /// form) is refused with the reason, and the watches in force stay; a good one replaces them.
    @Test func aReloadWithABadWatchIsRefusedAndTheWatchesInForceStay() async throws {
        let daemon = try await self.daemonWithApp()
        let socket = daemon.socketPath
        func names() async throws -> [String] {
            try await onThread {
                (try testClient(socket).call("io.coalesced.System.ListWatches")["watches"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
            }
        }
        #expect(try await names() == ["cfg"])
        let rest = "[System]\nFollowTimeZone=no\n[Memory]\nPressure=no\n"
        let refusals = [
            ("[JournalWatch gone]\nUnit=a.service\nKind=k.x\nTo=org.example.absent\n", "[JournalWatch gone]: no app org.example.absent is registered"),
            ("[JournalWatch long]\nKind=k.x\nTo=org.example.mail\nGrep=\(String(repeating: "a", count: 300))\n", "a message pattern is 1 to 256 bytes"),
            ("[JournalWatch form]\nKind=k.x\nTo=org.example.mail\nMatch=lower=x\n", "the match 'lower=x': a journal field name is upper-case letters"),
            ("[JournalWatch costly]\nKind=k.x\nTo=org.example.mail\nGrep=((a{1,100}){1,100}){1,100}\n", "regular expression is too large"),
        ]
        for (index, (text, reason)) in refusals.enumerated() {
            try daemon.directory.write("coalesced.conf", rest + text)
            daemon.signal(SIGHUP)
            let ready = try await onThread { daemon.notify.waitFor("READY=1") }
            #expect(ready?.contains("STATUS=Reload failed") == true, "\(ready ?? "no READY=1")")
            try await onThread {
                try waitUntil("the refusal \(index) logged", timeout: .seconds(10)) { daemon.output.contains(reason) }
            }
            #expect(try await names() == ["cfg"], "the watches in force stay")
        }
        try daemon.directory.write("coalesced.conf", rest + "[JournalWatch other]\nIdentifier=cron\nKind=k.y\nTo=org.example.mail\n")
        daemon.signal(SIGHUP)
        #expect(try await onThread { daemon.notify.waitFor("READY=1") }?.contains("Reload failed") == false)
        #expect(try await names() == ["other"])
        daemon.signal(SIGKILL)
    }

    /// A stored watch whose pattern PCRE2 refuses as too large (kept by a daemon with another matcher, or edited in
    /// the store) is left out at start and said in the log: the daemon starts as small as ever.
    @Test func aStoredWatchWithACostlyPatternIsLeftOutAtStartNotCompiled() async throws {
        var daemon = try await self.daemonWithApp()
        #expect(try await self.ctl(daemon, ["watch", "add", "stored", "--grep", "a{2}", "--kind", "k", "--to", "org.example.mail"]).status == 0)
        daemon.signal(SIGTERM)
        let stopped = daemon
        #expect(try await onThread { stopped.waitForExit() } == 0)
        try await onThread {
            try editStore(
                stopped.stateDirectory + "/coalesced.db",
                "UPDATE journal_watch SET definition = json_set(definition, '$.grep', '((a{1,100}){1,100}){1,100}')"
            )
        }
        daemon = try await onThread { [daemon] in try daemon.restartedWhenReady(configuration: Self.configuration, endingWith: SIGTERM) }
        #expect(daemon.output.contains("Journal watch left out") && daemon.output.contains("regular expression is too large"), "\(daemon.output)")
        #expect((daemon.residentKiB ?? Int.max) < 256 << 10, "\(daemon.residentKiB ?? 0) KiB")
        let listed = try await self.ctl(daemon, ["watch", "list", "--no-legend"])
        #expect(!listed.stdout.contains("stored"), "\(listed.stdout)")
        daemon.signal(SIGKILL)
    }

    /// The inotify instances of a process (its descriptors that are one).
    static func inotifyInstances(_ pid: Int32) -> Int {
        let directory = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.count { (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)) == "anon_inode:inotify" }
    }

    /// A daemon without watches opens no journal (no files, no inotify instance: the machine has few of them),
    /// says so in Stats, and opens it with its first watch.
    @Test func theJournalIsOpenedWithTheFirstWatchOnly() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": "org.example.mail"])
            let journal = try client.call("io.coalesced.System.Stats")["stats"]?["journal"]
            #expect(journal?["followed"] == false && journal?["reason"] == "no watches", "\(String(describing: journal))")
        }
        #expect(Self.inotifyInstances(daemon.pid) == 0)
        #expect(try await self.ctl(daemon, ["watch", "add", "w", "--kind", "k", "--to", "org.example.mail"]).status == 0)
        let socket = daemon.socketPath
        try await onThread {
            let client = try testClient(socket)
            try waitUntil("the journal opened", timeout: .seconds(10)) {
                try client.call("io.coalesced.System.Stats")["stats"]?["journal"]?["followed"] == true
            }
        }
        #expect(Self.inotifyInstances(daemon.pid) == 1, "sd-journal's, to follow the files")
        daemon.signal(SIGKILL)
    }
}
