import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The screen lock through the sandbox's real logind: a session on seat0 opened through PAM (a transient unit with
/// PAMName=, as a login does), whose LockedHint is set with SetLockedHint, as a screen locker sets it. No graphical
/// session or locker runs here; logind's part is real. The lock interrupts the app on screen, as `[System]
/// LockInterrupts=yes` (the default) has it.
@Suite(.serialized) struct LockTests {
    /// Sets the session's LockedHint, as its screen locker would.
    static func setLockedHint(_ sandbox: SystemdSandbox, session: String, _ locked: Bool) throws {
        let path = try sandbox.run(
            "busctl", "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "GetSession", "s", session
        ).stdout.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
        let set = try sandbox.run(
            "busctl", "call", "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "SetLockedHint", "b", locked ? "true" : "false"
        )
        #expect(set.status == 0, "\(set.stderr)")
    }

    @Test func runningAppsHearTheLockAtOnceAndSuspendedOnesItsNetChangeOnWake() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.writeExampleAppUnit("example-news.service", app: "org.example.news")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "systemd-logind.service").status == 0)
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            try sandbox.registerApp("org.example.news", launchUnit: "example-news.service")
            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").stdout == "org.example.mail: active\n")
            #expect(try sandbox.run("coalescectl", "launch", "--background", "org.example.news").status == 0)
            try waitUntil("the news app suspended", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "app", "org.example.news").stdout.contains("suspended")
            }

            // A login on seat0 after the daemon started: the seat's ActiveSession changes, and is followed.
            let login = try sandbox.run(
                "systemd-run", "--unit=login-session", "-p", "PAMName=login", "-p", "User=root", "-E", "XDG_SEAT=seat0",
                "-E", "XDG_SESSION_TYPE=tty", "-E", "XDG_SESSION_CLASS=user", "/bin/sleep", "infinity"
            )
            #expect(login.status == 0, "\(login.stderr)")
            let session = try sandbox.run("loginctl", "show-seat", "seat0", "-p", "ActiveSession", "--value").stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!session.isEmpty)
            try waitUntil("the daemon to follow session \(session)", timeout: .seconds(20), poll: .milliseconds(100)) {
                let stats = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.Stats", "{}").stdout)
                return stats["stats"]?["system"]?["lock"]?["session"] == .string(session)
            }

            // Locked and unlocked: the app on screen is interrupted by the lock (willResignActive, then its data
            // goes) and made active by the unlock (then its data comes back); the suspended one hears nothing, then
            // nothing on its wake.
            try Self.setLockedHint(sandbox, session: session, true)
            try waitUntil("the running app told of the lock", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").suffix(2) == ["willResignActive", "protectedDataWillBecomeUnavailable"]
            }
            #expect(try sandbox.run("coalescectl", "app", "org.example.mail").stdout.contains("inactive"))
            try Self.setLockedHint(sandbox, session: session, false)
            try waitUntil("the running app told of the unlock", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").suffix(2) == ["didBecomeActive", "protectedDataDidBecomeAvailable"]
            }
            #expect(try sandbox.run("coalescectl", "activate", "org.example.news").status == 0)
            try waitUntil("the news app active", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-news.service").last == "didBecomeActive"
            }
            #expect(try !sandbox.callbacks(ofUnit: "example-news.service").contains { $0.hasPrefix("protectedData") })

            // Locked while the mail app is suspended (activating news sent it to the background): its wake brings
            // the lock, once.
            try waitUntil("the mail app suspended", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "app", "org.example.mail").stdout.contains("suspended")
            }
            try Self.setLockedHint(sandbox, session: session, true)
            try waitUntil("the running news app told of the lock", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-news.service").last == "protectedDataWillBecomeUnavailable"
            }
            let mailBefore = try sandbox.callbacks(ofUnit: "example-mail.service")
            #expect(try sandbox.run("coalescectl", "activate", "org.example.mail").status == 0)
            try waitUntil("the woken mail app told of the lock", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").last == "protectedDataWillBecomeUnavailable"
            }
            let woke = try sandbox.callbacks(ofUnit: "example-mail.service").dropFirst(mailBefore.count)
            #expect(Array(woke) == ["willEnterForeground", "didBecomeActive", "protectedDataWillBecomeUnavailable"], "\(woke)")

            let journal = try sandbox.run("journalctl", "-o", "json", "--output-fields=COALESCED_LOCKED,COALESCED_SESSION", "MESSAGE_ID=b8a27dfd229b4272b6e884b7ec4e0975")
                .stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
            #expect(journal.map { $0["COALESCED_LOCKED"]?.stringValue ?? "?" } == ["true", "false", "true"], "\(journal)")
            #expect(journal.allSatisfy { $0["COALESCED_SESSION"] == .string(session) })
            // The transitions the lock made are logged with its reasons.
            let reasons = try sandbox.run("journalctl", "-o", "cat", "--output-fields=COALESCED_REASON", "COALESCED_APP=org.example.mail", "COALESCED_REASON=lock", "+", "COALESCED_APP=org.example.mail", "COALESCED_REASON=unlock")
                .stdout.split(separator: "\n")
            #expect(reasons.count == 2, "\(reasons)")
        }
    }
}
