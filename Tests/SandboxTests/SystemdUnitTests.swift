import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// coalesced under a real systemd 252, through the shipped unit files, driven with systemctl and journalctl.
@Suite(.serialized) struct SystemdUnitTests {
    /// Where the sandbox cannot run, say so loudly; under CI it must run, so its absence fails.
    static func requireSandbox() -> Bool {
        if SystemdSandbox.isAvailable { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("the systemd sandbox tests need root, and CI=true requires them to run")
        } else {
            print("⚠️  SKIPPING the systemd sandbox tests: they need root (namespaces, cgroups, mounts)")
        }
        return false
    }

    @Test func unitsVerifyAndSocketActivationStartsTheService() async throws {
        guard Self.requireSandbox() else { return }
        try await withSystemdSandbox { sandbox in
            try sandbox.installUnits()
            // verify looks up the man pages the units' Documentation= names: the repository's, put where man finds
            // them inside the sandbox (its /usr/local/share/man is the host's).
            for (page, section) in [("coalesced", 8), ("coalesced.conf", 5), ("coalescectl", 1)] {
                let text = try String(contentsOfFile: SystemdSandbox.repository + "/man/\(page).\(section)", encoding: .utf8)
                try sandbox.write("/run/man/man\(section)/\(page).\(section)", text)
            }
            let verify = try sandbox.run(
                "env", "MANPATH=/run/man", "systemd-analyze", "verify",
                "/run/systemd/system/coalesced.service", "/run/systemd/system/coalesced.socket"
            )
            #expect(verify.status == 0, "systemd-analyze verify: \(verify.stderr)")

            #expect(try sandbox.run("systemctl", "start", "coalesced.socket").status == 0)
            #expect(try sandbox.property("coalesced.service", "ActiveState") == "inactive")
            // The first connection starts the service; coalescectl waits for its reply.
            let status = try sandbox.run("coalescectl", "status")
            #expect(status.status == 0, "coalescectl status: \(status.stderr)")
            #expect(status.stdout.contains("Version: 0.1.0"))
            // The daemon answers on the socket systemd passed as soon as it serves; READY=1 follows, and systemd
            // takes it in on its own time.
            var state = ""
            try waitUntil("coalesced.service to be active (ActiveState=\(state))", timeout: .seconds(10), poll: .milliseconds(50)) {
                state = try sandbox.property("coalesced.service", "ActiveState")
                return state == "active"
            }
            #expect(try sandbox.property("coalesced.service", "Type") == "notify")
            let statusText = try sandbox.property("coalesced.service", "StatusText")
            #expect(statusText.hasPrefix("Serving /run/coalesced/io.coalesced (fd 3 from socket activation)"), "\(statusText)")
        }
    }

    @Test func journalEntriesCarryTheStructuredFields() async throws {
        guard Self.requireSandbox() else { return }
        try await withSystemdSandbox { sandbox in
            try sandbox.write("/etc/coalesced/coalesced.conf", "[Memory]\nPressure=yes\n")  // the defaults, followed
            try sandbox.installUnits()
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            #expect(try sandbox.run("systemctl", "reload", "coalesced.service").status == 0)
            try waitUntil("the reload in the journal", timeout: .seconds(10), poll: .milliseconds(50)) {
                try sandbox.run("journalctl", "-o", "json", "MESSAGE_ID=6ab1dea5eea941e2a65c779e0a3dcd9b").stdout.contains("Configuration reloaded")
            }
            let started = try sandbox.run(
                "journalctl", "-o", "json", "--output-fields=MESSAGE,PRIORITY,SYSLOG_IDENTIFIER,CODE_FILE,CODE_LINE,CODE_FUNC,COALESCED_SOCKET,COALESCED_INSTANCE,COALESCED_VERSION,MESSAGE_ID,_SYSTEMD_UNIT",
                "MESSAGE_ID=d2415ccfc6e24ad782ec5497e5865f79"
            ).stdout
            let entry = try JSONParser.parse(String(try #require(started.split(separator: "\n").first)))
            #expect(entry["MESSAGE"] == "Serving")
            #expect(entry["PRIORITY"] == "5")
            #expect(entry["SYSLOG_IDENTIFIER"] == "coalesced")
            #expect(entry["COALESCED_INSTANCE"] == "system")
            #expect(entry["COALESCED_VERSION"] == "0.1.0")
            #expect(entry["COALESCED_SOCKET"]?.stringValue?.hasPrefix("/run/coalesced/io.coalesced") == true)
            #expect(entry["CODE_FILE"]?.stringValue?.hasSuffix("Daemon.swift") == true)
            #expect(entry["CODE_LINE"]?.stringValue.flatMap { Int($0) } != nil)
            #expect(entry["_SYSTEMD_UNIT"] == "coalesced.service")
            // Under the shipped unit (no CAP_SYS_RESOURCE, kernel tunables read-only) the default 2 s windows make
            // kernel triggers, and the start says so.
            let pressure = try sandbox.run(
                "journalctl", "-o", "json",
                "--output-fields=MESSAGE,COALESCED_PRESSURE_MODE,COALESCED_PRESSURE_FILE,COALESCED_PRESSURE_WARNING,COALESCED_PRESSURE_CRITICAL",
                "_SYSTEMD_UNIT=coalesced.service", "COALESCED_PRESSURE_FILE=/proc/pressure/memory"
            ).stdout
            let pressureEntry = try JSONParser.parse(String(try #require(pressure.split(separator: "\n").first)))
            #expect(pressureEntry["COALESCED_PRESSURE_MODE"] == "triggers", "\(pressureEntry)")
            #expect(pressureEntry["COALESCED_PRESSURE_WARNING"] == "some 70ms 2s")
            #expect(pressureEntry["COALESCED_PRESSURE_CRITICAL"] == "full 100ms 2s")
        }
    }

    /// Real memory pressure (a hog in a memory cgroup of the host's: PSI counts the whole machine) while a suspended
    /// app runs as a unit of its own under the shipped daemon unit: the daemon purges it, and the journal's purge
    /// entry carries the pressure figures and the app's resident bytes as fields.
    @Test func aPurgeUnderMemoryPressureIsJournaledWithItsFigures() async throws {
        guard Self.requireSandbox() else { return }
        guard let cgroup = MemoryCgroup(name: "coalesced-sandbox-pressure-\(getpid())", limit: 32 << 20) else {
            Issue.record("the sandbox runs as root, so a memory cgroup can be made")
            return
        }
        // Removing the cgroup waits for its processes to end: on a thread of its own, as the cleanup.
        try await withBlockingCleanup {
            let directory = try TemporaryDirectory()
            try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
                try sandbox.write("/etc/coalesced/coalesced.conf", "[Memory]\nWarning=some 10ms 2s\nCritical=full 20ms 2s\n")
                try sandbox.installUnits()
                #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
                let started = try sandbox.run(
                    "systemd-run", "--unit=big-app", "/usr/local/bin/coalesce-example", "--name", "org.example.big", "--ballast", "48"
                )
                #expect(started.status == 0, "systemd-run: \(started.stderr)")
                let state = { () -> String? in
                    let reply = try? sandbox.run("coalescectl", "call", "io.coalesced.System.GetApp", #"{"app":"org.example.big"}"#)
                    return (try? JSONParser.parse(reply?.stdout ?? ""))?["app"]?["state"]?.stringValue
                }
                try waitUntil("the app active", timeout: .seconds(20), poll: .milliseconds(50)) { state() == "active" }
                #expect(try sandbox.run("coalescectl", "call", "io.coalesced.System.Deactivate", #"{"app":"org.example.big"}"#).status == 0)
                // Another test's pressure on the machine (PSI counts all of it) may purge the app already: the journal
                // entry checked below says it was a purge either way.
                try waitUntil("the app suspended", timeout: .seconds(20), poll: .milliseconds(50)) {
                    ["suspended", "notRunning"].contains(state())
                }

                let hog = try cgroup.hog(file: directory.file("hog.data"), seconds: 90)
                defer {
                    cgroup.killProcesses()
                    _ = hog.wait(timeout: .seconds(10))
                }
                try waitUntil("the app purged", timeout: .seconds(60), poll: .milliseconds(100)) { state() == "notRunning" }
                let fields = [
                    "MESSAGE", "COALESCED_APP", "COALESCED_REASON", "COALESCED_RESIDENT_BYTES", "COALESCED_PRESSURE_LEVEL",
                    "COALESCED_PRESSURE_SOME_AVG10", "COALESCED_PRESSURE_FULL_AVG10", "COALESCED_PRESSURE_SOME_TOTAL",
                    "COALESCED_PRESSURE_FULL_TOTAL",
                ]
                var entry: JSONValue = .null
                try waitUntil("the purge in the journal", timeout: .seconds(10), poll: .milliseconds(50)) {
                    let found = try sandbox.run(
                        "journalctl", "-o", "json", "--output-fields=" + fields.joined(separator: ","),
                        "MESSAGE_ID=f54cf9d32843419fade869b06484eabf"
                    ).stdout.split(separator: "\n").first
                    entry = try found.map { try JSONParser.parse(String($0)) } ?? .null
                    return entry != .null
                }
                #expect(entry["MESSAGE"] == "org.example.big: purged to reclaim memory under memory pressure")
                #expect(entry["COALESCED_APP"] == "org.example.big")
                #expect(entry["COALESCED_REASON"] == "purge")
                #expect((entry["COALESCED_RESIDENT_BYTES"]?.stringValue.flatMap { Int($0) } ?? 0) > 48 << 20)
                #expect(["warning", "critical"].contains(entry["COALESCED_PRESSURE_LEVEL"]?.stringValue ?? ""), "\(entry)")
                for field in fields.dropFirst(5) {
                    #expect(entry[field]?.stringValue.flatMap { Double($0) } != nil, "\(field) in \(entry)")
                }
            }
        } cleanup: {
            #expect(cgroup.remove(), "the cgroup \(cgroup.path) is removed")
        }
    }

    /// `systemctl restart coalesced` leaves a running app as it was: its process (a service of its own, the example
    /// app built on the client library) attaches again to the new daemon, which takes it up in its state without a
    /// launch, and the journal says so.
    @Test func aRestartOfTheServiceLeavesRunningAppsInTheirStates() async throws {
        guard Self.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            let started = try sandbox.run(
                "systemd-run", "--unit=mail-app", "/usr/local/bin/coalesce-example", "--name", "org.example.mail"
            )
            #expect(started.status == 0, "systemd-run: \(started.stderr)")
            let app = { () throws -> JSONValue in
                let reply = try sandbox.run("coalescectl", "call", "io.coalesced.System.GetApp", #"{"app":"org.example.mail"}"#)
                return try JSONParser.parse(reply.stdout)["app"] ?? .null
            }
            var seen: JSONValue = .null
            try waitUntil("the app active and attached (\(seen))", timeout: .seconds(20), poll: .milliseconds(50)) {
                seen = (try? app()) ?? .null
                return seen["state"] == "active" && seen["attached"] == true
            }
            let pid = seen["pid"]
            let daemonPID = try sandbox.property("coalesced.service", "MainPID")

            #expect(try sandbox.run("systemctl", "restart", "coalesced.service").status == 0)
            #expect(try sandbox.property("coalesced.service", "MainPID") != daemonPID)
            try waitUntil("the app attached again (\(seen))", timeout: .seconds(20), poll: .milliseconds(50)) {
                seen = (try? app()) ?? .null
                return seen["attached"] == true
            }
            #expect(seen["state"] == "active")
            #expect(seen["pid"] == pid)
            let appLog = try sandbox.run("journalctl", "-u", "mail-app", "--no-pager", "-o", "cat").stdout
            #expect(appLog.components(separatedBy: "didFinishLaunching").count == 2, "launched once: \(appLog)")
            let log = try sandbox.run("journalctl", "-u", "coalesced.service", "--no-pager", "-o", "cat").stdout
            #expect(log.contains("Leaving 1 running app as it is for the next start"), "\(log)")
            #expect(log.contains("org.example.mail: active as before the restart"), "\(log)")
            #expect(!log.contains("processExited"), "\(log)")
        }
    }

    @Test func watchdogRestartsAHungDaemon() async throws {
        guard Self.requireSandbox() else { return }
        try await withSystemdSandbox { sandbox in
            // A short watchdog so the test is quick; everything else is the shipped unit.
            try sandbox.installUnits(dropIns: ["coalesced.service.d/watchdog.conf": "[Service]\nWatchdogSec=2s\n"])
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            let firstPID = try sandbox.property("coalesced.service", "MainPID")
            #expect(firstPID != "0")
            let stoppedAt = ContinuousClock.now
            #expect(try sandbox.run("kill", "-STOP", firstPID).status == 0)
            let journal = { (try? sandbox.run("journalctl", "-u", "coalesced.service", "--no-pager").stdout) ?? "unreadable" }
            try waitUntil("a restart by the watchdog; journal: \(journal())", timeout: .seconds(60), poll: .milliseconds(50)) {
                let pid = try sandbox.property("coalesced.service", "MainPID")
                return try sandbox.property("coalesced.service", "NRestarts") == "1" && pid != "0" && pid != firstPID
                    && sandbox.property("coalesced.service", "ActiveState") == "active"
            }
            let elapsed = ContinuousClock.now - stoppedAt
            FileHandle.standardError.write(
                Data("watchdog restart: \(elapsed) from SIGSTOP to the new instance active (WatchdogSec=2s)\n".utf8)
            )
            #expect(try sandbox.run("coalescectl", "status").status == 0)
            let log = try sandbox.run("journalctl", "-u", "coalesced.service", "--no-pager").stdout
            #expect(log.contains("Watchdog timeout"), "\(log)")
        }
    }
}
