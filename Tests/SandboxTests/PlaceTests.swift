import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The time zone and the locale, changed inside the sandbox through timedatectl and localectl (the sandbox has its
/// own /etc; the host's zone and locale are never touched): a running app hears each change at once, a suspended
/// app one event of each kind, the latest, on its wake.
@Suite(.serialized) struct PlaceTests {
    /// The wall clock less the boot-time clock, in seconds: constant unless someone sets the clock.
    static func wallMinusBoot() -> Double {
        var wall = timespec()
        var boot = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_BOOTTIME, &boot)
        return Double(wall.tv_sec - boot.tv_sec) + Double(wall.tv_nsec - boot.tv_nsec) / 1e9
    }

    @Test func zoneAndLocaleChangesReachRunningAppsAtOnceAndSuspendedOnesOnWake() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl", "coalesce-example"]) { sandbox in
            try sandbox.installUnits()
            try sandbox.writeExampleAppUnit("example-mail.service", app: "org.example.mail")
            try sandbox.writeExampleAppUnit("example-news.service", app: "org.example.news")
            try sandbox.run("systemctl", "daemon-reload")
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            try sandbox.registerApp("org.example.mail", launchUnit: "example-mail.service")
            try sandbox.registerApp("org.example.news", launchUnit: "example-news.service")
            #expect(try sandbox.run("coalescectl", "launch", "org.example.mail").stdout == "org.example.mail: active\n")
            #expect(try sandbox.run("coalescectl", "launch", "--background", "org.example.news").status == 0)
            try waitUntil("the news app suspended", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.run("coalescectl", "app", "org.example.news").stdout.contains("suspended")
            }

            // Two zones and two locales in a row. The host's clock must not move: timedated in the sandbox cannot
            // tell the kernel the zone (which warps the clock the first time since boot).
            let offset = Self.wallMinusBoot()
            for zone in ["Europe/Berlin", "Asia/Tokyo"] {
                let set = try sandbox.run("timedatectl", "set-timezone", zone)
                #expect(set.status == 0, "\(set.stderr)")
                try waitUntil("the running app told of \(zone)", timeout: .seconds(20), poll: .milliseconds(100)) {
                    try sandbox.output(ofUnit: "example-mail.service").contains { $0.hasPrefix("event system.timeZoneChanged") && $0.contains(zone) }
                }
            }
            for locale in ["LANG=de_DE.UTF-8", "LANG=fr_FR.UTF-8"] {
                let set = try sandbox.run("localectl", "set-locale", locale)
                #expect(set.status == 0, "\(set.stderr)")
                try waitUntil("the running app told of \(locale)", timeout: .seconds(20), poll: .milliseconds(100)) {
                    try sandbox.output(ofUnit: "example-mail.service").contains { $0.hasPrefix("event system.localeChanged") && $0.contains(locale) }
                }
            }
            // The suspended app heard nothing yet; woken, one event of each kind, the latest.
            #expect(try !sandbox.output(ofUnit: "example-news.service").contains { $0.hasPrefix("event system.") })
            #expect(try sandbox.run("coalescectl", "activate", "org.example.news").status == 0)
            try waitUntil("the woken app's events", timeout: .seconds(20), poll: .milliseconds(100)) {
                let lines = try sandbox.output(ofUnit: "example-news.service")
                return lines.contains { $0.hasPrefix("event system.timeZoneChanged") } && lines.contains { $0.hasPrefix("event system.localeChanged") }
            }
            let news = try sandbox.output(ofUnit: "example-news.service").filter { $0.hasPrefix("event system.") }
            #expect(abs(Self.wallMinusBoot() - offset) < 5, "the host's clock moved by \(Self.wallMinusBoot() - offset) s")
            #expect(news.count == 2, "\(news)")
            #expect(news.contains { $0.hasPrefix("event system.timeZoneChanged count=2") && $0.contains("Asia/Tokyo") }, "\(news)")
            #expect(news.contains { $0.hasPrefix("event system.localeChanged count=2") && $0.contains("LANG=fr_FR.UTF-8") }, "\(news)")
            let journal = try sandbox.run("journalctl", "-o", "cat", "MESSAGE_ID=6fd9924c5f914d61aec4c965a3174068").stdout
            #expect(journal.contains("The time zone is Asia/Tokyo"), "\(journal)")
        }
    }
}
