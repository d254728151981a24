import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Journal watches against the sandbox's real journald: services write entries (transient units whose output
/// journald takes, with `<N>` priority prefixes), the daemon's watches post them, the example app prints what it
/// receives.
@Suite(.serialized) struct JournalWatchTests {
    static let binaries = ["coalesced", "coalescectl", "coalesce-example"]

    /// Stats' journal member.
    static func journalStats(_ sandbox: SystemdSandbox) throws -> JSONValue? {
        let text = try sandbox.run("coalescectl", "call", "io.coalesced.System.Stats", "{}").stdout
        return try JSONParser.parse(text)["stats"]?["journal"]
    }

    /// Runs `script` in a transient service `unit` and waits for it to end; its output goes to the journal.
    static func runService(_ sandbox: SystemdSandbox, _ unit: String, _ script: String) throws {
        let run = try sandbox.run("systemd-run", "--unit=\(unit)", "--wait", "--quiet", "/bin/sh", "-c", script)
        #expect(run.status == 0, "\(unit): \(run.stderr)")
    }

    /// The events of `kind` the example app in `unit` printed, each as its count and payload.
    static func events(_ sandbox: SystemdSandbox, unit: String, kind: String) throws -> [(count: Int, payload: JSONValue)] {
        try sandbox.output(ofUnit: unit).compactMap { line -> (Int, JSONValue)? in
            guard line.hasPrefix("event \(kind) count=") else { return nil }
            let rest = line.dropFirst("event \(kind) count=".count)
            guard let space = rest.firstIndex(of: " "), let count = Int(rest[..<space]) else { return nil }
            // `payload=JSON seq=N`: the JSON has no space outside its strings' own.
            var payload = rest[space...].dropFirst(" payload=".count)
            if let seq = payload.range(of: " seq=", options: .backwards) { payload = payload[..<seq.lowerBound] }
            return (count, (try? JSONParser.parse(String(payload))) ?? .null)
        }
    }

    @Test func errorsWrittenWhileTheAppIsSuspendedArriveAsOneEventWithTheirCountAndTheLastLine() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: Self.binaries) { sandbox in
            try sandbox.write(
                "/etc/coalesced/coalesced.conf",
                """
                [Memory]
                Pressure=no
                [JournalWatch noisy-errors]
                Unit=noisy.service
                Priority=err
                Kind=log.noisy.errors
                To=org.example.mail

                """
            )
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            #expect(try sandbox.run("coalescectl", "launch", "--background", "org.example.mail").status == 0)
            try waitUntil("the mail app suspended", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "app", "org.example.mail").stdout.contains("suspended")
            }

            // 1,532 errors and some lines of other priorities, in one burst.
            try Self.runService(
                sandbox, "noisy.service",
                #"for i in $(seq 1 1532); do echo "<3>disk error $i"; if [ $((i % 100)) = 0 ]; then echo "<6>info $i"; echo "<4>warning $i"; fi; done"#
            )
            try waitUntil("the watch to match every error", timeout: .seconds(30), poll: .milliseconds(100)) {
                try Self.journalStats(sandbox)?["matched"]?.intValue == 1532
            }
            #expect(try Self.events(sandbox, unit: "example-mail.service", kind: "log.noisy.errors").isEmpty, "a suspended app hears nothing")
            let held = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.GetQueue", #"{"app":"org.example.mail"}"#).stdout)
            #expect(held["held"]?.arrayValue?.count == 1, "one kind held: \(held)")

            #expect(try sandbox.run("coalescectl", "activate", "org.example.mail").status == 0)
            try waitUntil("the woken app's event", timeout: .seconds(20), poll: .milliseconds(100)) {
                try !Self.events(sandbox, unit: "example-mail.service", kind: "log.noisy.errors").isEmpty
            }
            let events = try Self.events(sandbox, unit: "example-mail.service", kind: "log.noisy.errors")
            #expect(events.count == 1, "one event: \(events)")
            #expect(events.first?.count == 1532, "its count is the errors matched")
            let last = events.first?.payload
            let printed = try sandbox.output(ofUnit: "example-mail.service").filter { $0.hasPrefix("event ") }
            #expect(last?["MESSAGE"] == "disk error 1532", "the last line: \(printed)")
            #expect(last?["PRIORITY"] == "3")
            #expect(last?["_SYSTEMD_UNIT"] == "noisy.service")
            #expect(last?["watch"] == "noisy-errors")
            #expect(last?["__CURSOR"]?.stringValue?.hasPrefix("s=") == true)
            #expect(last?["__REALTIME_TIMESTAMP"]?.stringValue.flatMap { UInt64($0) } != nil)
            #expect(last?["_PID"] != nil)

            let list = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.ListWatches", "{}").stdout)
            let watch = list["watches"]?.arrayValue?.first
            #expect(watch?["name"] == "noisy-errors" && watch?["origin"] == "configuration")
            #expect(watch?["matched"] == 1532)
        }
    }

    /// The messages a watch's queue delivered to the example app in `unit`, in order of delivery.
    static func deliveredMessages(_ sandbox: SystemdSandbox, unit: String, kind: String) throws -> [String] {
        try Self.events(sandbox, unit: unit, kind: kind).compactMap { $0.payload["MESSAGE"]?.stringValue }
    }

    /// How many posts of `kind` the app holds.
    static func heldCount(_ sandbox: SystemdSandbox, app: String, kind: String) throws -> Int64 {
        let queue = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.GetQueue", #"{"app":"\#(app)"}"#).stdout)
        return queue["held"]?.arrayValue?.first { $0["kind"]?.stringValue == kind }?["count"]?.intValue ?? 0
    }

    /// Waits for the daemon to answer again after systemd restarted it.
    static func waitForDaemon(_ sandbox: SystemdSandbox) throws {
        try waitUntil("the daemon to serve", timeout: .seconds(30), poll: .milliseconds(100)) {
            try sandbox.run("coalescectl", "call", "io.coalesced.System.Stats", "{}").status == 0
        }
    }

    /// The ledger's lines as the journal holds them now.
    static func journalLines(_ sandbox: SystemdSandbox) throws -> [String] {
        try sandbox.run("journalctl", "-o", "cat", "SYSLOG_IDENTIFIER=ledger").stdout.split(separator: "\n").map(String.init)
    }

    /// A queue watch whose bound is above everything written: every entry is its own event. Entries keep coming
    /// while the daemon is killed (SIGKILL) three times, while journald restarts, and across a stop after which
    /// the entry at the stored position is vacuumed away. Once the app runs, it has received every line the journal
    /// took exactly once: none missing, none twice.
    @Test func everyEntryArrivesExactlyOnceAcrossKillsJournaldRestartsAndVacuuming() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: Self.binaries) { sandbox in
            try sandbox.write(
                "/etc/coalesced/coalesced.conf",
                """
                [Memory]
                Pressure=no
                [Journal]
                QueueBurst=10000
                [JournalWatch ledger]
                Identifier=ledger
                Kind=log.ledger
                To=org.example.mail
                Policy=queue:10000
                Fields=MESSAGE __CURSOR

                """
            )
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")

            // Lines 1-1500, a few milliseconds apart; meanwhile three kills and a restart of journald.
            let writer = try sandbox.run(
                "systemd-run", "--unit=ledger-one", "-p", "SyslogIdentifier=ledger", "/bin/sh", "-c",
                #"for i in $(seq 1 1500); do echo "line $i"; sleep 0.004; done"#
            )
            #expect(writer.status == 0, "\(writer.stderr)")
            for round in 1...3 {
                try waitUntil("the ledger to reach \(round * 300) lines held", timeout: .seconds(60), poll: .milliseconds(20)) {
                    try Self.heldCount(sandbox, app: "org.example.mail", kind: "log.ledger") >= Int64(round * 300)
                }
                #expect(try sandbox.run("systemctl", "kill", "-s", "KILL", "coalesced.service").status == 0)
                try Self.waitForDaemon(sandbox)
            }
            #expect(try sandbox.run("systemctl", "restart", "systemd-journald.service").status == 0)
            try waitUntil("the first writer to end", timeout: .seconds(120), poll: .milliseconds(100)) {
                try sandbox.property("ledger-one.service", "ActiveState") != "active"
            }
            var written = try Self.journalLines(sandbox)
            #expect(written.count > 1400, "journald took the first writer's lines: \(written.count)")
            try waitUntil("every line of the first writer held", timeout: .seconds(60), poll: .milliseconds(100)) {
                try Self.heldCount(sandbox, app: "org.example.mail", kind: "log.ledger") >= Int64(written.count)
            }

            // Stopped; the files holding every entry so far rotated and vacuumed away; 500 more lines; started.
            #expect(try sandbox.run("systemctl", "stop", "coalesced.service").status == 0)
            #expect(try sandbox.run("journalctl", "--rotate").status == 0)
            #expect(try sandbox.run("journalctl", "--vacuum-size=1").status == 0)
            #expect(try Self.journalLines(sandbox).isEmpty, "the ledger's entries are vacuumed away")
            try Self.runService(sandbox, "ledger-two", #"for i in $(seq 1501 2000); do echo "line $i"; done"#)
            written += try Self.journalLines(sandbox)
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try waitUntil("every line held", timeout: .seconds(60), poll: .milliseconds(100)) {
                try Self.heldCount(sandbox, app: "org.example.mail", kind: "log.ledger") >= Int64(written.count)
            }
            let gone = try sandbox.run("journalctl", "-o", "cat", "-u", "coalesced.service").stdout
            #expect(gone.contains("reading on from the closest entry after it"), "the lost position is logged")

            // The app runs and receives what it held: each line the journal took, exactly once.
            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").status == 0)
            try waitUntil("the app to receive every line", timeout: .seconds(60), poll: .milliseconds(200)) {
                try Self.deliveredMessages(sandbox, unit: "example-mail.service", kind: "log.ledger").count >= written.count
            }
            let delivered = try Self.deliveredMessages(sandbox, unit: "example-mail.service", kind: "log.ledger")
            let twice = Dictionary(delivered.map { ($0, 1) }, uniquingKeysWith: +).filter { $0.value > 1 }.keys.sorted()
            #expect(twice.isEmpty, "delivered twice: \(twice.prefix(20))")
            #expect(Set(written).subtracting(delivered).isEmpty, "missing: \(Set(written).subtracting(delivered).sorted().prefix(20))")
            #expect(delivered.count == written.count)
        }
    }

    /// Each kind of match, through watches added at run time with coalescectl, to a running app (a queue policy:
    /// each entry its own event): a unit, a user unit, an identifier, a priority ceiling, fields ORed within a
    /// field and ANDed across, a regular expression and a substring on the message, and the payload's fields. A
    /// watch to another app reaches that app only. A message its regular expression cannot test within the
    /// matcher's limits is not taken, is counted and said in the log, and the entries after it are read as ever.
    @Test func watchesMatchByUnitIdentifierPriorityFieldsAndMessageAndReachOnlyTheirTarget() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: Self.binaries) { sandbox in
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.writeExampleAppUnit("example-news.service", app: "org.example.news")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            // The news app launched first and sent to the background by the mail app, which stays in front.
            for app in ["news", "mail"] {
                try sandbox.registerApp("org.example.\(app)", launchUnit: "example-\(app).service")
                #expect(try sandbox.run("coalescectl", "launch", "org.example.\(app)").status == 0)
            }
            func add(_ name: String, _ arguments: String...) throws {
                let run = try sandbox.run(
                    ["coalescectl", "watch", "add", name, "--kind", "t.\(name)", "--to", "org.example.mail", "--policy", "queue:1000"] + arguments
                )
                #expect(run.status == 0, "\(name): \(run.stderr)")
            }
            try add("unit", "--unit", "m-unit.service")
            try add("userunit", "--user-unit", "m-user.service")
            try add("ident", "--identifier", "m-ident")
            try add("prio", "--identifier", "m-prio", "--priority", "warning")
            try add("fields", "--match", "TESTFIELD=a", "--match", "TESTFIELD=b", "--match", "OTHER=x")
            try add("grep", "--identifier", "m-text", "--grep", "fail(ed|ure) [0-9]+")
            try add("contains", "--identifier", "m-text", "--contains", "needle")
            // Thirty a's: every way of splitting them between the optional and the counted ones is tried.
            try add("costly", "--identifier", "m-costly", "--grep", "^(a?){30}a{30}$")
            try add("payload", "--identifier", "m-payload", "--field", "MESSAGE", "--field", "SYSLOG_IDENTIFIER")
            let news = try sandbox.run(
                "coalescectl", "watch", "add", "news", "--identifier", "m-news", "--kind", "t.news", "--to", "org.example.news"
            )
            #expect(news.status == 0, "\(news.stderr)")

            // A monitor of the mail app's traffic sees the watches' posts, each with the watch that made it.
            #expect(try sandbox.run("systemd-run", "--unit=watch-monitor", "coalescectl", "monitor", "--traffic", "--app", "org.example.mail").status == 0)
            try waitUntil("the monitor in place", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.output(ofUnit: "watch-monitor.service").contains { $0.hasPrefix("Monitoring") }
            }
            try Self.runService(sandbox, "m-unit", "echo unit one; echo unit two")
            try Self.runService(sandbox, "m-other", "echo not the unit")
            for (priority, text) in [("err", "p err"), ("warning", "p warning"), ("notice", "p notice"), ("info", "p info")] {
                #expect(try sandbox.run("logger", "-t", "m-prio", "-p", "user.\(priority)", text).status == 0)
            }
            for (fields, text) in [("TESTFIELD=a\nOTHER=x", "f a x"), ("TESTFIELD=b\nOTHER=x", "f b x"), ("TESTFIELD=c\nOTHER=x", "f c x"), ("TESTFIELD=a\nOTHER=y", "f a y")] {
                try sandbox.write("/run/fields.txt", "MESSAGE=\(text)\n\(fields)\n")
                #expect(try sandbox.run("logger", "--journald=/run/fields.txt").status == 0)
            }
            #expect(try sandbox.run("logger", "-t", "m-costly", String(repeating: "a", count: 30)).status == 0)
            for text in ["the job failed 12 times", "failure 7", "fail x", "a needle here", "hay"] {
                #expect(try sandbox.run("logger", "-t", "m-text", text).status == 0)
            }
            #expect(try sandbox.run("logger", "-t", "m-ident", "ident line").status == 0)
            #expect(try sandbox.run("logger", "-t", "m-payload", "payload line").status == 0)
            #expect(try sandbox.run("logger", "-t", "m-news", "news line").status == 0)
            // A user unit: the user manager of root, and a transient unit of its own. Its process stays a moment after
            // writing, so that journald still finds the unit of the stream's peer however busy the machine is.
            #expect(try sandbox.run("systemctl", "start", "user@0.service").status == 0)
            let user = try sandbox.run(
                "env", "XDG_RUNTIME_DIR=/run/user/0", "systemd-run", "--user", "--unit=m-user", "--wait", "--quiet", "/bin/sh", "-c", "echo user line; sleep 1"
            )
            #expect(user.status == 0, "\(user.stderr)")

            let expected: [String: [String]] = [
                "t.unit": ["unit one", "unit two"], "t.userunit": ["user line"], "t.ident": ["ident line"],
                "t.prio": ["p err", "p warning"], "t.fields": ["f a x", "f b x"],
                "t.grep": ["the job failed 12 times", "failure 7"], "t.contains": ["a needle here"], "t.payload": ["payload line"],
            ]
            func received() throws -> [String: [String]] {
                var byKind: [String: [String]] = [:]
                for line in try sandbox.output(ofUnit: "example-mail.service") where line.hasPrefix("event t.") {
                    let kind = String(line.dropFirst("event ".count).prefix { $0 != " " })
                    let message = try Self.events(sandbox, unit: "example-mail.service", kind: kind)
                    byKind[kind] = message.compactMap { $0.payload["MESSAGE"]?.stringValue }
                }
                return byKind
            }
            // Waited for, then compared: a difference shows kind by kind.
            try? waitUntil("every expected event", timeout: .seconds(30), poll: .milliseconds(200)) {
                try received() == expected
            }
            let got = try received()
            #expect(got == expected, "\(got.sorted { $0.key < $1.key })")
            func costly() throws -> JSONValue? {
                let listed = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.ListWatches", "{}").stdout)
                return listed["watches"]?.arrayValue?.first { $0["name"]?.stringValue == "costly" }
            }
            // The figures of a pass are added up at its end.
            try? waitUntil("the costly watch's untested entry counted", timeout: .seconds(20), poll: .milliseconds(200)) {
                try costly()?["untested"]?.intValue == 1
            }
            let counted = try costly()
            #expect(counted?["untested"]?.intValue == 1 && counted?["matched"]?.intValue == 0, "\(String(describing: counted))")
            let said = try sandbox.run("journalctl", "-o", "json", "MESSAGE_ID=36a580d88a5e49a08d17d8e405c3cdc9").stdout
            #expect(said.contains("COALESCED_WATCH\":\"costly") && said.contains("match limit exceeded"), "\(said)")
            let monitored = try sandbox.output(ofUnit: "watch-monitor.service")
            #expect(monitored.contains { $0.hasSuffix("org.example.mail: post t.ident from watch ident (uid 0): delivered") || $0.contains("post t.ident from watch ident (uid 0): delivered as seq") }, "\(monitored)")
            let payload = try Self.events(sandbox, unit: "example-mail.service", kind: "t.payload").first?.payload.objectValue
            #expect(payload?.keys.sorted() == ["MESSAGE", "SYSLOG_IDENTIFIER", "entries", "watch"], "\(String(describing: payload))")
            // The other app's watch went to it alone, held until it came back to the front.
            #expect(try sandbox.run("coalescectl", "activate", "org.example.news").status == 0)
            try waitUntil("the news app's event", timeout: .seconds(20), poll: .milliseconds(200)) {
                try Self.events(sandbox, unit: "example-news.service", kind: "t.news").map { $0.payload["MESSAGE"] } == ["news line"]
            }
            #expect(try !sandbox.output(ofUnit: "example-mail.service").contains { $0.contains("t.news") })
            #expect(try !sandbox.output(ofUnit: "example-news.service").contains { $0.hasPrefix("event t.") && !$0.hasPrefix("event t.news") })
        }
    }

    /// Stats round trips on `client`, in seconds, until `done` says to stop (at least `minimum` of them).
    static func statsRoundTrips(_ client: VarlinkClient, minimum: Int, until done: () throws -> Bool) throws -> [Double] {
        var times: [Double] = []
        while try times.count < minimum || !done() {
            let start = ContinuousClock.now
            _ = try client.call("io.coalesced.System.Stats")
            let elapsed = start.duration(to: .now)
            times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        return times.sorted()
    }

    /// A service floods the journal (journald's rate limit lifted) while the watch's app runs: the app gets one
    /// event per batch interval at most, whose counts add up to every line; the daemon answers Stats meanwhile
    /// about as fast as it does at rest; the watch's figures are right.
    @Test func aFloodReachesARunningAppInBoundedBatchesAndTheDaemonStaysResponsive() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: Self.binaries) { sandbox in
            try sandbox.write("/run/systemd/journald.conf.d/flood.conf", "[Journal]\nRateLimitIntervalSec=0\n")
            #expect(try sandbox.run("systemctl", "restart", "systemd-journald.service").status == 0)
            try sandbox.write(
                "/etc/coalesced/coalesced.conf",
                "[Memory]\nPressure=no\n[JournalWatch flood]\nUnit=flood.service\nKind=log.flood\nTo=org.example.mail\n"
            )
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").status == 0)

            // Stats at rest, on a connection from outside the sandbox through its root.
            let client = try testClient("/proc/\(sandbox.pid)/root/run/coalesced/io.coalesced")
            let rest = try Self.statsRoundTrips(client, minimum: 50) { true }
            let lines = 60_000
            let started = ContinuousClock.now
            let writer = try sandbox.run("systemd-run", "--unit=flood", "/bin/sh", "-c", "seq -f 'flood %g' 1 \(lines)")
            #expect(writer.status == 0, "\(writer.stderr)")
            let flooded = try Self.statsRoundTrips(client, minimum: 50) {
                try Self.journalStats(sandbox)?["matched"]?.intValue ?? 0 >= Int64(lines)
            }
            let elapsed = started.duration(to: .now)
            let p99 = { (times: [Double]) in times[min(times.count - 1, times.count * 99 / 100)] }
            print("journal flood: \(lines) lines matched in \(elapsed); Stats p99 \(p99(rest)) s at rest, \(p99(flooded)) s in the flood")
            #expect(p99(flooded) < p99(rest) + 0.5, "Stats p99 \(p99(flooded)) s in the flood, \(p99(rest)) s at rest")

            try waitUntil("the last batch to reach the app", timeout: .seconds(30), poll: .milliseconds(200)) {
                try Self.events(sandbox, unit: "example-mail.service", kind: "log.flood").reduce(0) { $0 + $1.count } >= lines
            }
            let events = try Self.events(sandbox, unit: "example-mail.service", kind: "log.flood")
            #expect(events.reduce(0) { $0 + $1.count } == lines, "every line counted once")
            #expect(events.last?.payload["MESSAGE"] == .string("flood \(lines)"), "the last batch ends with the last line")
            // One post per interval (100ms) at most, from the flood's start until its last batch came.
            let lasted = started.duration(to: .now)
            let intervals = Int((Double(lasted.components.seconds) + Double(lasted.components.attoseconds) / 1e18) * 10) + 2
            #expect(events.count <= intervals, "\(events.count) events over \(lasted)")
            let stats = try Self.journalStats(sandbox)
            #expect(stats?["matched"]?.intValue == Int64(lines))
            #expect(stats?["posts"]?.intValue == Int64(events.count), "a post per event: \(String(describing: stats))")
            let watch = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.ListWatches", "{}").stdout)["watches"]?.arrayValue?.first
            #expect(watch?["matched"]?.intValue == Int64(lines) && watch?["posts"]?.intValue == Int64(events.count))
        }
    }

    /// Watches added one right after the other, each from the journal's head, each read every entry of theirs
    /// (a watch added while the reader went back for the one before is not taken for having read what it has
    /// not); and a watch from the head that has read nothing yet when the daemon stops reads, after the start,
    /// what was written meanwhile.
    @Test func watchesFromTheHeadReadEveryEntryWhateverComesBetween() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: Self.binaries) { sandbox in
            try sandbox.installUnits()
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            try Self.runService(sandbox, "marks", "seq -f 'line %g' 1 20000 | sed 's/0$/0 mark/'")
            let names = (1...6).map { "head\($0)" }
            // Added at once: each change comes while the reader reads again from the head for the one before.
            let adds = names.map { name in
                "coalescectl watch add \(name) --unit marks.service --contains mark --kind k.\(name) --to org.example.mail --start head &"
            }
            let added = try sandbox.run("/bin/sh", "-c", adds.joined(separator: "\n") + "\nwait")
            #expect(added.status == 0, "\(added.stderr)")
            func matched() throws -> [String: Int64] {
                let list = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.ListWatches", "{}").stdout)
                return Dictionary(uniqueKeysWithValues: (list["watches"]?.arrayValue ?? []).compactMap { watch in
                    watch["name"]?.stringValue.map { ($0, watch["matched"]?.intValue ?? -1) }
                })
            }
            try? waitUntil("each watch to match every mark", timeout: .seconds(30), poll: .milliseconds(100)) {
                try matched().count == names.count && matched().values.allSatisfy { $0 >= 2000 }
            }
            #expect(try matched() == Dictionary(uniqueKeysWithValues: names.map { ($0, 2000) }))

            // A watch from the head of a unit that has logged nothing yet; the daemon stopped; 2,000 lines; started.
            // Stopped at once after the add, before the watch can have read anything.
            let quiet = try sandbox.run(
                "/bin/sh", "-c",
                "coalescectl watch add later --unit later.service --kind k.later --to org.example.mail --start head && systemctl stop coalesced.service"
            )
            #expect(quiet.status == 0, "\(quiet.stderr)")
            try Self.runService(sandbox, "later", "seq -f 'later %g' 1 2000")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try? waitUntil("the later watch to read what was written while the daemon was stopped", timeout: .seconds(30), poll: .milliseconds(100)) {
                try matched()["later"] == 2000
            }
            #expect(try matched()["later"] == 2000)
            let log = try sandbox.run("journalctl", "-o", "cat", "-u", "coalesced.service").stdout
            #expect(!log.contains("is gone"), "no position was lost: \(log)")
        }
    }
}
