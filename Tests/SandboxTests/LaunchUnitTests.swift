import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Launch through systemd: the daemon as the shipped coalesced.service, the example app as a unit of its own that
/// systemd starts when System.Launch asks for it (StartUnit over D-Bus), and the journal entries it writes.
@Suite(.serialized) struct LaunchUnitTests {
    @Test func launchStartsTheAppsUnitAndTheJournalRecordsEveryTransition() async throws {
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
                "coalescectl", "call", "io.coalesced.App.Register",
                #"{"name":"org.example.mail","launchUnit":"example-mail.service"}"#
            )
            #expect(registered.status == 0, "\(registered.stderr)")
            #expect(try sandbox.property("example-mail.service", "ActiveState") == "inactive")

            let launched = try sandbox.run("coalescectl", "launch", "org.example.mail")
            #expect(launched.status == 0, "\(launched.stderr)")
            #expect(launched.stdout == "org.example.mail: active\n")
            #expect(try sandbox.property("example-mail.service", "ActiveState") == "active")
            let mainPID = try sandbox.property("example-mail.service", "MainPID")
            let apps = try sandbox.run("coalescectl", "apps").stdout
            #expect(apps.split(separator: "\n").contains { line in
                line.hasPrefix("org.example.mail") && line.contains(" active ") && line.contains(" \(mainPID) ")
                    && line.contains("example-mail.service")
            }, "\(apps)")

            try waitUntil("the launch's two transitions in the journal", timeout: .seconds(10), poll: .milliseconds(50)) {
                try sandbox.run("journalctl", "-o", "json", "MESSAGE_ID=2a906d1513cc406fa724cbb88e6640e3")
                    .stdout.split(separator: "\n").count >= 2
            }
            let entries = try sandbox.run(
                "journalctl", "-o", "json",
                "--output-fields=MESSAGE,COALESCED_APP,COALESCED_FROM,COALESCED_TO,COALESCED_REASON,COALESCED_PID",
                "MESSAGE_ID=2a906d1513cc406fa724cbb88e6640e3"
            ).stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
            #expect(entries.map { "\($0["COALESCED_FROM"]?.stringValue ?? "?")>\($0["COALESCED_TO"]?.stringValue ?? "?")" } == ["notRunning>inactive", "inactive>active"])
            #expect(entries.allSatisfy { $0["COALESCED_APP"] == "org.example.mail" && $0["COALESCED_REASON"] == "launch" })
            #expect(entries.first?["COALESCED_PID"] == .string(mainPID))

            // Terminate: willTerminate, the app exits on its own, and its unit with it.
            #expect(try sandbox.run("coalescectl", "terminate", "org.example.mail").stdout == "org.example.mail: notRunning\n")
            try waitUntil("example-mail.service to stop", timeout: .seconds(10), poll: .milliseconds(50)) {
                try sandbox.property("example-mail.service", "ActiveState") == "inactive"
            }
            let stopped = try sandbox.run(
                "journalctl", "-o", "json", "--output-fields=COALESCED_REASON,COALESCED_TO",
                "MESSAGE_ID=2a906d1513cc406fa724cbb88e6640e3", "COALESCED_REASON=terminate"
            ).stdout
            #expect(stopped.contains(#""COALESCED_TO":"notRunning""#), "\(stopped)")

            // A unit systemd cannot start is a LaunchFailed that names it.
            _ = try sandbox.run(
                "coalescectl", "call", "io.coalesced.App.Register",
                #"{"name":"org.example.missing","launchUnit":"missing.service"}"#
            )
            let failed = try sandbox.run("coalescectl", "launch", "org.example.missing")
            #expect(failed.status == 1)
            #expect(failed.stderr.contains("io.coalesced.System.LaunchFailed") && failed.stderr.contains("missing.service"), "\(failed.stderr)")
        }
    }
}
