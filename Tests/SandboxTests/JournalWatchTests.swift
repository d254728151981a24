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
}
