import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// A suspended app woken into the background for its events (`wakes: background`, the sender's content-available),
/// as real processes: the example app, stopped with SIGSTOP while suspended, is continued, handles what it held
/// without coming forward, and is suspended (and stopped) again once it has acknowledged it.
@Suite struct BackgroundWakeTests {
    static let mail = "org.example.mail"

    @Test func aPostOfAWakingKindWakesTheSuspendedAppIntoTheBackgroundForWhatItHeld() async throws {
        let daemon = try DaemonProcess(configuration: SuspensionTests.configuration)
        defer { daemon.signal(SIGKILL) }
        try await onThread {
            try daemon.waitUntilReady()
            let system = try testClient(daemon.socketPath)
            let kinds: JSONValue = [
                "mail.unread": ["policy": "sum", "field": "n", "wakes": "background"],
                "mail.subject": ["policy": "latest"],
            ]
            _ = try system.call("io.coalesced.App.Register", ["name": .string(Self.mail), "kinds": kinds])
            let shown = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "app", Self.mail])
            #expect(shown.stdout.contains("mail.unread: sum:n, wakes it from suspension"), "\(shown.stdout)")

            let mail = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
            #expect(try mail.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try SuspensionTests.sendHome(mail, system)
            try SuspensionTests.waitForState(mail, stopped: true)

            // A kind that does not wake: held, the app left as it is.
            #expect(try post(system, Self.mail, "mail.subject", ["s": "first"]) == false)
            #expect(try post(system, Self.mail, "mail.subject", ["s": "last"]) == false)
            #expect(try appInfo(system, Self.mail)["state"] == "suspended")
            // The operator asks why it does not run: how it is held, what it holds, what would wake it.
            let explained = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "explain", Self.mail])
            let lines = explained.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("\(Self.mail): suspended since ") == true, "\(explained.stdout)\(explained.stderr)")
            #expect(lines.first?.hasSuffix("(backgroundWorkDone)") == true, "\(explained.stdout)")
            #expect(Array(lines.dropFirst()) == [
                "  - It is suspended and stopped (SIGSTOP): it runs no code.",
                "  - It holds 2 posts of mail.subject, delivered coalesced when it runs again.",
                "  - A post of mail.unread wakes it into the background; otherwise it runs again when it is activated.",
            ], "\(explained.stdout)")

            // One that does: the app is continued, and gets what it held, coalesced, with no callback.
            _ = try post(system, Self.mail, "mail.unread", ["n": 2])
            let woken = try mail.events(atLeast: 2)
            #expect(Set(woken) == [#"event mail.subject count=2 payload={"s":"last"}"#, #"event mail.unread count=1 payload={"n":2}"#])
            #expect(!mail.output.contains { $0.hasPrefix("callback willEnterForeground") }, "a wake does not bring it forward")
            #expect(daemon.output.contains("\(Self.mail): suspended → background (eventWake)"), "\(daemon.output.suffix(2000))")

            // It acknowledged them (the client does when the burst is handled): suspended, and stopped, again.
            try waitForApp(system, Self.mail, "state", "suspended")
            try SuspensionTests.waitForState(mail, stopped: true)
            #expect(daemon.output.contains("\(Self.mail): background → suspended (backgroundWorkDone)"))
            #expect(mail.output.filter { $0.hasPrefix("callback ") }.count == 5, "\(mail.output)")
            mail.kill()
        }
    }
}
