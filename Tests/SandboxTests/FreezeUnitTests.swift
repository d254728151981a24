import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Real suspension under systemd 252: an app running in its own launch unit is frozen with FreezeUnit while it is
/// suspended and thawed with ThawUnit when it wakes; a unit with WatchdogSec= is not frozen (systemd before 258
/// kills it frozen) but stopped, with a journal entry saying so.
@Suite(.serialized) struct FreezeUnitTests {
    @Test func anAppInItsOwnUnitIsFrozenWhileSuspendedAndThawedOnItsWake() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.writeExampleAppUnit("example-watch.service", app: "org.example.watch", serviceLines: "WatchdogSec=1h")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            try sandbox.registerApp("org.example.watch", launchUnit: "example-watch.service")

            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").stdout == "org.example.mail: active\n")
            #expect(try sandbox.property("example-mail.service", "FreezerState") == "running")
            #expect(try sandbox.run("coalescectl", "deactivate", "org.example.mail").status == 0)
            try waitUntil("example-mail.service to be frozen", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.property("example-mail.service", "FreezerState") == "frozen"
            }
            let apps = try sandbox.run("coalescectl", "apps").stdout
            let journal = try sandbox.run("journalctl", "-o", "cat", "-u", "coalesced.service").stdout
            #expect(apps.contains("suspended (frozen)"), "\(apps)\n\(journal)")
            #expect(try sandbox.run("coalescectl", "post", "org.example.mail", "mail.new", #"{"n":1}"#).status == 0)
            #expect(try sandbox.run("coalescectl", "post", "org.example.mail", "mail.new", #"{"n":2}"#).status == 0)
            #expect(try sandbox.callbacks(ofUnit: "example-mail.service") == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"])

            // Woken: thawed, then its callbacks and the one event the two posts became.
            #expect(try sandbox.run("coalescectl", "activate", "org.example.mail").status == 0)
            try waitUntil("the wake's callbacks in example-mail.service's journal", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").count == 7
            }
            #expect(try sandbox.property("example-mail.service", "FreezerState") == "running")
            #expect(try sandbox.callbacks(ofUnit: "example-mail.service").suffix(2) == ["willEnterForeground", "didBecomeActive"])
            try waitUntil("the held event in example-mail.service's journal", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.run("journalctl", "-o", "cat", "-u", "example-mail.service").stdout
                    .contains(#"event mail.new count=2 payload={"n":2}"#)
            }
            let held = try sandbox.run(
                "journalctl", "-o", "cat", "COALESCED_APP=org.example.mail", "COALESCED_SUSPENSION=frozen"
            ).stdout
            #expect(held.contains("frozen (FreezeUnit example-mail.service, "), "\(held)")
            let thawed = try sandbox.run("journalctl", "-o", "cat", "COALESCED_APP=org.example.mail", "COALESCED_SUSPENSION=thawed").stdout
            #expect(thawed.contains("thawed (ThawUnit example-mail.service, "), "\(thawed)")

            // A purge kills it frozen: no process is left.
            #expect(try sandbox.run("coalescectl", "deactivate", "org.example.mail").status == 0)
            try waitUntil("example-mail.service to be frozen again", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.property("example-mail.service", "FreezerState") == "frozen"
            }
            #expect(try sandbox.run("coalescectl", "purge", "org.example.mail").status == 0)
            try waitUntil("example-mail.service to end", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.property("example-mail.service", "MainPID") == "0"
                    && sandbox.property("example-mail.service", "ActiveState") != "active"
            }
            let tasks = try sandbox.property("example-mail.service", "TasksCurrent")
            #expect(tasks == "0" || tasks == "[not set]", "\(tasks)")

            // Launched again, and frozen again; the daemon restarted meanwhile (kill -9, as a crash) leaves it frozen
            // and takes it up so, and its wake thaws it: it attaches again and hears the wake, with no launch.
            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").stdout == "org.example.mail: active\n")
            #expect(try sandbox.run("coalescectl", "deactivate", "org.example.mail").status == 0)
            try waitUntil("example-mail.service to be frozen once more", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.property("example-mail.service", "FreezerState") == "frozen"
            }
            let before = try sandbox.callbacks(ofUnit: "example-mail.service").count
            #expect(try sandbox.run("systemctl", "kill", "-s", "KILL", "coalesced.service").status == 0)
            try waitUntil("coalesced.service to be restarted", timeout: .seconds(30), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "app", "org.example.mail").stdout.contains("suspended (frozen)")
            }
            #expect(try sandbox.property("example-mail.service", "FreezerState") == "frozen")
            #expect(try sandbox.run("coalescectl", "activate", "org.example.mail").status == 0)
            try waitUntil("the wake's callbacks after the restart", timeout: .seconds(20), poll: .milliseconds(50)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").count == before + 2
            }
            #expect(try sandbox.callbacks(ofUnit: "example-mail.service").suffix(2) == ["willEnterForeground", "didBecomeActive"])
            #expect(try sandbox.property("example-mail.service", "FreezerState") == "running")

            // The watchdog's unit is stopped instead, and the journal says why.
            #expect(try sandbox.run("coalescectl", "launch", "org.example.watch").stdout == "org.example.watch: active\n")
            let pid = try sandbox.property("example-watch.service", "MainPID")
            #expect(try sandbox.run("coalescectl", "deactivate", "org.example.watch").status == 0)
            try waitUntil("pid \(pid) of example-watch.service to be stopped", timeout: .seconds(20), poll: .milliseconds(50)) {
                let stat = try sandbox.run("cat", "/proc/\(pid)/stat").stdout
                return stat.split(separator: ")").last?.split(separator: " ").first == "T"
            }
            #expect(try sandbox.property("example-watch.service", "FreezerState") == "running")
            let refused = try sandbox.run("journalctl", "-o", "cat", "COALESCED_APP=org.example.watch", "COALESCED_SUSPENSION=stopped").stdout
            #expect(refused.contains("not frozen: example-watch.service has WatchdogSec= set"), "\(refused)")
            #expect(try sandbox.run("coalescectl", "activate", "org.example.watch").status == 0)
            try waitUntil("pid \(pid) to run again", timeout: .seconds(20), poll: .milliseconds(50)) {
                let stat = try sandbox.run("cat", "/proc/\(pid)/stat").stdout
                return stat.split(separator: ")").last?.split(separator: " ").first != "T"
            }
        }
    }
}
