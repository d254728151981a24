import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Notifications under a real systemd: the journal entry each presentation writes (its MESSAGE_ID and fields), and
/// a response that launches the app through its unit.
@Suite(.serialized) struct NotificationJournalTests {
    @Test func aPresentationIsInTheJournalAndAResponseLaunchesTheAppsUnit() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.write(
                "/run/systemd/system/example-mail.service",
                """
                [Unit]
                Description=The example app, launched by coalesced

                [Service]
                ExecStart=/usr/local/bin/coalesce-example --socket /run/coalesced/io.coalesced --name org.example.mail --launch-unit example-mail.service

                """
            )
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            let registered = try sandbox.run(
                "coalescectl", "call", "io.coalesced.App.Register", #"{"name":"org.example.mail","launchUnit":"example-mail.service"}"#
            )
            #expect(registered.status == 0, "\(registered.stderr)")
            let scheduled = try sandbox.run(
                "coalescectl", "notify", "schedule", "org.example.mail", "hello", "--in", "1s", "--title", "Hello journal",
                "--body", "From the sandbox", "--thread", "inbox", "--badge", "2"
            )
            #expect(scheduled.status == 0 && scheduled.stdout.hasPrefix("next: "), "\(scheduled.stderr)")
            try waitUntil("the presentation's journal entry", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("journalctl", "-o", "json", "MESSAGE_ID=676e507e53544eda89245077d7bec2ea").stdout.contains("Hello journal")
            }
            let entry = try JSONParser.parse(
                try sandbox.run(
                    "journalctl", "-o", "json",
                    "--output-fields=MESSAGE,COALESCED_APP,COALESCED_NOTIFICATION,COALESCED_THREAD,COALESCED_TITLE,COALESCED_BODY,_SYSTEMD_UNIT",
                    "MESSAGE_ID=676e507e53544eda89245077d7bec2ea"
                ).stdout.split(separator: "\n").first.map(String.init) ?? "{}"
            )
            #expect(entry["COALESCED_APP"] == "org.example.mail" && entry["COALESCED_NOTIFICATION"] == "hello")
            #expect(entry["COALESCED_THREAD"] == "inbox" && entry["COALESCED_TITLE"] == "Hello journal")
            #expect(entry["COALESCED_BODY"] == "From the sandbox" && entry["_SYSTEMD_UNIT"] == "coalesced.service")
            #expect(try sandbox.run("coalescectl", "notify", "badge", "org.example.mail").stdout == "badge: 2\n")

            // The user opens it: the stopped app's unit is started, and the app receives the response.
            #expect(try sandbox.property("example-mail.service", "ActiveState") == "inactive")
            let answered = try sandbox.run("coalescectl", "notify", "respond", "org.example.mail", "hello")
            #expect(answered.status == 0, "\(answered.stderr)")
            try waitUntil("example-mail.service to start", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.property("example-mail.service", "ActiveState") == "active"
            }
            try waitUntil("the app to be active", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "apps").stdout.contains(" active ")
            }
            try waitUntil("the response's journal entry", timeout: .seconds(10), poll: .milliseconds(100)) {
                try sandbox.run("journalctl", "-o", "json", "MESSAGE_ID=a9bea36de025434086cd2c6f4fc52120").stdout.contains("org.example.mail")
            }
            try waitUntil("the app to print the response", timeout: .seconds(10), poll: .milliseconds(100)) {
                try sandbox.run("journalctl", "-u", "example-mail.service", "--no-pager", "-o", "cat").stdout
                    .contains("notification didReceiveResponse id=hello action=default")
            }
        }
    }

    /// The sandbox's /etc is an overlay: its zone link can be changed as timedatectl would, without touching the
    /// host's.
    @Test func aTimeZoneChangeMovesFloatingRulesAndLeavesZonedOnes() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl"]) { sandbox in
            try sandbox.installUnits()
            #expect(try sandbox.run("ln", "-sf", "/usr/share/zoneinfo/UTC", "/etc/localtime").status == 0)
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            _ = try sandbox.run("coalescectl", "call", "io.coalesced.App.Register", #"{"name":"org.example.clock"}"#)
            for (id, calendar) in [("floating", "*-*-* 08:30"), ("zoned", "*-*-* 08:30 UTC")] {
                let scheduled = try sandbox.run(
                    "coalescectl", "notify", "schedule", "org.example.clock", id, "--on", calendar, "--repeat", "--title", id
                )
                #expect(scheduled.status == 0, "\(scheduled.stderr)")
            }
            func nextDates() throws -> [String: Double] {
                let reply = try JSONParser.parse(try sandbox.run("coalescectl", "-o", "json", "notify", "pending", "org.example.clock").stdout)
                var dates: [String: Double] = [:]
                for entry in reply["pending"]?.arrayValue ?? [] {
                    if let id = entry["request"]?["id"]?.stringValue, let next = entry["next"]?.doubleValue { dates[id] = next }
                }
                return dates
            }
            let before = try nextDates()
            // 08:30 UTC: both at 30,600 s past a midnight UTC.
            #expect(before["floating"].map { Int($0) % 86_400 } == 30_600 && before["zoned"].map { Int($0) % 86_400 } == 30_600, "\(before)")
            #expect(try sandbox.run("ln", "-sf", "/usr/share/zoneinfo/Asia/Tokyo", "/etc/localtime").status == 0)
            // 08:30 in Tokyo (UTC+9) is 23:30 UTC: 84,600 s past a midnight UTC; the zoned rule stays.
            try waitUntil("the floating rule to follow the new zone", timeout: .seconds(20), poll: .milliseconds(100)) {
                try nextDates()["floating"].map { Int($0) % 86_400 } == 84_600
            }
            #expect(try nextDates()["zoned"] == before["zoned"])
            let logged = try sandbox.run("journalctl", "-u", "coalesced.service", "--no-pager", "-o", "cat").stdout
            #expect(logged.contains("The time zone changed"), "\(logged)")
        }
    }
}
