@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Real suspension (DESIGN.md §5) on the manager in process: an app's ``FakeProcess`` keeps the signals the manager
/// sent it, so that whether a suspended app was stopped is read from them and from how the manager says it holds the
/// app (`suspendedAs`), on the manual clock. A stopped app across a restart is in ``InProcessRestartTests``; the
/// kernel's own account of a stopped process (/proc/PID/stat) is tested end to end, in `ProcessTests`; freezing by
/// the unit's cgroup is in ``InProcessFreezeTests``. What the system says meanwhile (the time zone, the locale) is
/// held for a suspended app until its wake.
@Suite struct InProcessSuspensionTests {
    static let mail = "org.example.mail"

    /// An app is not stopped while an event it was sent is unacknowledged: one that hangs in an event's handler
    /// in the background and is then suspended (its background task ended) is left running.
    @Test func anAppThatHasNotAcknowledgedWhatItWasSentIsNotStopped() async throws {
        try await withManager(configuration: try configuration("[Apps]\nSuspensionDelaySec=100ms\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let app = try await fixture.attach(Self.mail)
            #expect(try await app.sent().callbacks == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try app.acknowledge()
            _ = try fixture.manager.deactivate(name: Self.mail)
            #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
            // As the example app with --task-on-background sync --end-task-after 1 --stall-on-event mail.ping: its
            // didEnterBackground begins a task and is acknowledged; the event is read and never acknowledged.
            let task = try fixture.manager.beginBackgroundTask(name: Self.mail, uid: 0, taskName: "sync")
            try app.acknowledge()
            #expect(try await fixture.post(Self.mail, "mail.ping", [:]) == true)
            #expect(try await app.kinds() == ["mail.ping"])
            await fixture.clock.advance(to: .seconds(1))
            try fixture.manager.endBackgroundTask(name: Self.mail, uid: 0, id: task.id)
            #expect(try app.state == .suspended)
            // Ten times SuspensionDelaySec=: an app with nothing unacknowledged would be stopped by now.
            for elapsed in [1100, 1500, 2000] {
                await fixture.clock.advance(to: .milliseconds(elapsed))
                #expect(app.process.signals.isEmpty && !app.process.isStopped, "after \(elapsed) ms")
                #expect(try app.snapshot.hold == nil, "after \(elapsed) ms")
                #expect(try app.state == .suspended)
            }
        }
    }

    /// The time zone and the locale, followed while an app is suspended: a running app hears each change at once,
    /// the suspended one nothing until its wake, and then, after the wake's callbacks, one event of each kind with
    /// the latest value and how many changes it stands for. The zone comes through the daemon's follower; the
    /// locale's follower reads localed's signal from the bus, which no test in process has, so the locale is posted
    /// as that follower posts it. The sandbox's `PlaceTests` change both through timedatectl and localectl.
    @Test func zoneAndLocaleChangesWhileSuspendedComeAsOneEventEachOnTheWake() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let news = "org.example.news"
            try await fixture.register(news)
            let suspended = try await fixture.attach(news)
            let launched = try await suspended.sent().callbacks
            #expect(launched == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try suspended.acknowledge()
            _ = try fixture.manager.deactivate(name: news)
            let home = try await suspended.sent().callbacks
            #expect(home == ["willResignActive", "didEnterBackground"])
            try suspended.acknowledge()
            #expect(try suspended.state == .suspended)
            try await fixture.register(Self.mail)
            let running = try await fixture.attach(Self.mail)
            let started = try await running.sent().callbacks
            #expect(started == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try running.acknowledge()

            let follower = ClockZoneLocaleFollower(
                apps: fixture.manager, logger: Logger(label: "test", factory: { _ in fixture.logs })
            )
            var heard: [String] = []
            for zone in ["Europe/Berlin", "Asia/Tokyo"] {
                follower.timeZoneChanged(to: zone)
                heard += try await running.replies(atLeast: 1).compactMap { $0["parameters"]?["callback"] }.map(Self.line)
                try running.acknowledge()
            }
            for locale in ["LANG=de_DE.UTF-8", "LANG=fr_FR.UTF-8"] {
                let told = fixture.manager.postToRunningApps(
                    kind: ClockZoneLocaleFollower.localeChanged, payload: ["locale": [.string(locale)]], policy: .latest
                )
                // Both apps have a process, so both are posted to: the suspended one holds it for its wake.
                #expect(told == 2)
                heard += try await running.replies(atLeast: 1).compactMap { $0["parameters"]?["callback"] }.map(Self.line)
                try running.acknowledge()
            }
            #expect(
                heard == [
                    #"system.timeZoneChanged count=1 {"timeZone":"Europe/Berlin"}"#,
                    #"system.timeZoneChanged count=1 {"timeZone":"Asia/Tokyo"}"#,
                    #"system.localeChanged count=1 {"locale":["LANG=de_DE.UTF-8"]}"#,
                    #"system.localeChanged count=1 {"locale":["LANG=fr_FR.UTF-8"]}"#,
                ]
            )
            let meanwhile = try await suspended.sent()
            #expect(meanwhile == TestApp.Sent(), "a suspended app hears nothing")
            #expect(
                fixture.logs.entries.contains { $0.message == "The time zone is Asia/Tokyo: 2 running apps told" },
                "\(fixture.logs.entries.map(\.message))"
            )

            _ = try fixture.manager.activate(name: news)
            let woken = try await suspended.replies(atLeast: 4).compactMap { $0["parameters"]?["callback"] }
            #expect(
                woken.map(Self.line) == [
                    "lifecycle.willEnterForeground count=- -", "lifecycle.didBecomeActive count=- -",
                    #"system.timeZoneChanged count=2 {"timeZone":"Asia/Tokyo"}"#,
                    #"system.localeChanged count=2 {"locale":["LANG=fr_FR.UTF-8"]}"#,
                ]
            )
            let more = try await suspended.sent()
            #expect(more == TestApp.Sent(), "one event of each kind")
        }
    }

    /// A callback or event as one line: its kind, its count and its payload (`-` where it has none).
    static func line(_ callback: JSONValue) -> String {
        let kind = callback["kind"]?.stringValue ?? "?"
        let count = callback["count"]?.intValue.map(String.init) ?? "-"
        let payload = callback["payload"].flatMap { $0 == .null ? nil : $0.jsonText } ?? "-"
        return "\(kind) count=\(count) \(payload)"
    }
}
