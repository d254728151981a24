import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Sleep and wake through the sandbox's real logind: `systemctl suspend` with systemd-suspend.service overridden
/// to sleep a few seconds (``SystemdSandbox/allowSuspend(sleeping:logindSettings:)``; nothing is suspended).
@Suite(.serialized) struct SleepTests {
    static let sleepMessage = "58a0ba871fb04ef9a44b5766ccd7da89"
    static let wakeMessage = "f771fdfbbc4c4558a8ac2b6fad83658e"
    static let transitionMessage = "2a906d1513cc406fa724cbb88e6640e3"

    /// The example app in a unit of its own, active in the foreground.
    static func launchExampleApp(_ sandbox: SystemdSandbox, extraArguments: String = "") throws {
        try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail", arguments: extraArguments)
        try sandbox.run("systemctl", "daemon-reload")
        #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
        try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
        let launched = try sandbox.run("coalescectl", "launch", "org.example.mail")
        #expect(launched.stdout == "org.example.mail: active\n", "\(launched.stderr)")
    }

    static func entries(_ sandbox: SystemdSandbox, _ messageID: String, fields: String = "MESSAGE,PRIORITY,COALESCED_APPS,COALESCED_LATE") throws -> [JSONValue] {
        try sandbox.run("journalctl", "-o", "json", "--output-fields=\(fields)", "MESSAGE_ID=\(messageID)")
            .stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    }

    static func inhibitors(_ sandbox: SystemdSandbox) throws -> String {
        try sandbox.run("systemd-inhibit", "--list", "--no-pager", "--no-legend").stdout
    }

    @Test func sleepInterruptsTheActiveAppAndWakeMakesItActiveAgain() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.allowSuspend(sleeping: 4)
            try Self.launchExampleApp(sandbox)
            try waitUntil("coalesced's delay inhibitor", timeout: .seconds(20), poll: .milliseconds(100)) {
                let list = try Self.inhibitors(sandbox)
                return list.contains("coalesced") && list.contains("delay") && list.contains("sleep")
            }

            #expect(try sandbox.run("systemctl", "suspend").status == 0)
            try waitUntil("the journal's going-to-sleep entry", timeout: .seconds(20), poll: .milliseconds(50)) {
                try !Self.entries(sandbox, Self.sleepMessage).isEmpty
            }
            // While it sleeps (the wake's entry is not written yet), the inhibitor is let go.
            let during = try Self.inhibitors(sandbox)
            if try Self.entries(sandbox, Self.wakeMessage).isEmpty {
                #expect(!during.contains("coalesced"), "\(during)")
            }
            try waitUntil("the journal's wake entry", timeout: .seconds(30), poll: .milliseconds(100)) {
                try !Self.entries(sandbox, Self.wakeMessage).isEmpty
            }
            let sleep = try Self.entries(sandbox, Self.sleepMessage)
            #expect(sleep.count == 1)
            #expect(sleep.first?["COALESCED_APPS"] == "org.example.mail" && sleep.first?["COALESCED_LATE"] == nil, "\(sleep)")
            try waitUntil("the inhibitor taken again", timeout: .seconds(20), poll: .milliseconds(100)) {
                try Self.inhibitors(sandbox).contains("coalesced")
            }

            // The transitions: active > inactive for sleep, inactive > active for the wake.
            let transitions = try sandbox.run(
                "journalctl", "-o", "json", "--output-fields=COALESCED_FROM,COALESCED_TO,COALESCED_REASON",
                "MESSAGE_ID=\(Self.transitionMessage)", "COALESCED_APP=org.example.mail"
            ).stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }.map {
                "\($0["COALESCED_FROM"]?.stringValue ?? "?")>\($0["COALESCED_TO"]?.stringValue ?? "?") \($0["COALESCED_REASON"]?.stringValue ?? "?")"
            }
            #expect(transitions.suffix(2) == ["active>inactive sleep", "inactive>active wake"], "\(transitions)")
            // The app heard willResignActive before the system slept and didBecomeActive after it woke.
            try waitUntil("the app's didBecomeActive", timeout: .seconds(10), poll: .milliseconds(100)) {
                try sandbox.callbacks(ofUnit: "example-mail.service").suffix(2) == ["willResignActive", "didBecomeActive"]
            }
            let order = try sandbox.run(
                "journalctl", "-o", "short-monotonic", "--no-pager", "-t", "coalesce-example", "-t", "coalesced", "-t", "systemd"
            ).stdout
            let resign = order.range(of: "callback willResignActive")
            let sleepStarts = order.range(of: "Starting systemd-suspend.service") ?? order.range(of: "System Suspend")
            let active = order.range(of: "callback didBecomeActive", options: .backwards)
            #expect(resign != nil && sleepStarts != nil && active != nil, "\(order)")
            if let resign, let sleepStarts, let active {
                #expect(resign.lowerBound < sleepStarts.lowerBound && sleepStarts.lowerBound < active.lowerBound, "\(order)")
            }
            #expect(try sandbox.run("coalescectl", "apps").stdout.contains(" active "))

            // Stats and STATUS= show the last sleep and wake.
            let stats = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.Stats", "{}").stdout)
            let sleepStats = stats["stats"]?["system"]?["sleep"]
            #expect(sleepStats?["lastSleep"]?.doubleValue != nil && sleepStats?["lastWake"]?.doubleValue != nil, "\(stats)")
            #expect(sleepStats?["inhibitorHeld"] == true)
            let status = try sandbox.run("coalescectl", "status").stdout
            #expect(status.contains("System: sleep inhibitor held, slept ") && status.contains(", woke "), "\(status)")
            try waitUntil("STATUS= with the sleep", timeout: .seconds(10), poll: .milliseconds(200)) {
                let status = try sandbox.property("coalesced.service", "StatusText")
                return status.contains("slept ") && status.contains("woke ")
            }
        }
    }

    @Test func anAppThatNeverAcknowledgesDoesNotHoldSleepBack() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.allowSuspend(sleeping: 2, logindSettings: "InhibitDelayMaxSec=2")
            try Self.launchExampleApp(sandbox, extraArguments: "--stall-on willResignActive")
            try waitUntil("coalesced's delay inhibitor", timeout: .seconds(20), poll: .milliseconds(100)) {
                try Self.inhibitors(sandbox).contains("coalesced")
            }
            let stats = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.Stats", "{}").stdout)
            #expect(stats["stats"]?["system"]?["sleep"]?["inhibitDelayMaxSec"]?.doubleValue == 2, "\(stats)")

            #expect(try sandbox.run("systemctl", "suspend").status == 0)
            try waitUntil("the wake entry", timeout: .seconds(30), poll: .milliseconds(100)) {
                try !Self.entries(sandbox, Self.wakeMessage).isEmpty
            }
            // The sleep went ahead (systemd-suspend.service ran), and the journal names the app that was late.
            let sleep = try Self.entries(sandbox, Self.sleepMessage)
            #expect(sleep.first?["COALESCED_LATE"] == "org.example.mail", "\(sleep)")
            #expect(sleep.first?["PRIORITY"] == "4", "\(sleep)")
            let ran = try sandbox.run("journalctl", "-o", "cat", "-u", "systemd-suspend.service").stdout
            #expect(ran.contains("Starting") || ran.contains("System Suspend") || ran.contains("Finished"), "\(ran)")
            // Held back no longer than logind's delay and the daemon's own budget: three quarters of two seconds.
            let preparation = try Self.entries(sandbox, Self.sleepMessage, fields: "COALESCED_PREPARATION_MS").first?["COALESCED_PREPARATION_MS"]?.stringValue
            #expect(preparation.flatMap(Int.init).map { $0 >= 1400 && $0 < 2000 } == true, "\(preparation ?? "none")")
        }
    }
}
