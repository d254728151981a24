import CoalesceCore
@testable import CoalesceServer
@testable import CoalesceStore
import CoalesceTestSupport
import GRDB
import Logging
import NIOEmbedded
import Synchronization
import Testing
import Varlink

/// What an app holds survives a restart of the daemon whoever posted it, the daemon's own kinds included; and what a
/// start cannot read back is set aside rather than keeping the store from opening. A manager in process on real
/// SQLite in a temporary state directory (``withManager(configuration:directory:processes:units:logs:_:)``), "restarted"
/// by closing its store and opening a new manager on the file.
@Suite struct HeldAcrossRestartTests {
    static let mail = try! AppName("org.example.mail")
    static let notes = try! AppName("org.example.notes")

    /// Every kind the daemon posts of its own: notifications, the lock's protected data, the clock, zone and locale.
    static let daemonKinds: [EventKind] = [
        NotificationCenter.willPresent, NotificationCenter.didReceiveResponse,
        AppManager.protectedDataWillBecomeUnavailable, AppManager.protectedDataDidBecomeAvailable,
        ClockZoneLocaleFollower.significantTimeChange, ClockZoneLocaleFollower.timeZoneChanged, ClockZoneLocaleFollower.localeChanged,
    ]

    /// Posts as the daemon does (``AppManager/postFromDaemon``) and waits until the post is on disk.
    func post(_ manager: AppManager, to app: AppName, _ kind: EventKind, _ payload: JSONValue, policy: CoalescingPolicy) async throws {
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let taken = manager.postFromDaemon(app, kind: kind, payload: payload, policy: policy) { _, failure in
                continuation.resume(returning: failure.map { "\($0)" })
            }
            if !taken { continuation.resume(returning: "\(app) is not registered") }
        }
        #expect(failure == nil, "the post of \(kind) was not kept")
    }

    func heldKinds(_ manager: AppManager, _ app: AppName) throws -> [String: Int] {
        Dictionary(uniqueKeysWithValues: try manager.queue(of: app.value).held.map { ($0.kind.value, $0.slot.count) })
    }

    @Test func everyKindTheDaemonPostsIsHeldAcrossARestart() async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }
        var expected = Dictionary(uniqueKeysWithValues: Self.daemonKinds.map { ($0.value, 2) })
        expected["server.error"] = 1
        try await withManager(configuration: Configuration(), directory: directory) { (fixture: ManagerFixture) async throws in
            let manager = fixture.manager
            _ = try await manager.register(
                name: Self.mail.value, traits: AppTraits(), launchUnit: .keep, declarations: EventDeclarations(), uid: 0, limit: 10
            )
            // As the daemon posts them: queued (notifications, the lock) and latest (the clock, zone and locale); a
            // journal watch's kind is a client's kind, posted by the daemon.
            for kind in Self.daemonKinds {
                let latest = kind.value.hasPrefix("system.") || kind == ClockZoneLocaleFollower.significantTimeChange
                for n in 1...2 {
                    try await self.post(manager, to: Self.mail, kind, ["n": .int(Int64(n))], policy: latest ? .latest : .queue(bound: 256))
                }
            }
            try await self.post(manager, to: Self.mail, try EventKind("server.error"), ["MESSAGE": "disk error"], policy: .count)
            #expect(try self.heldKinds(manager, Self.mail) == expected)
        }
        try await withManager(configuration: Configuration(), directory: directory) { (fixture: ManagerFixture) async throws in
            let manager = fixture.manager
            let held = try self.heldKinds(manager, Self.mail)
            #expect(held == expected, "every kind held before the restart, with its count: \(held)")
            #expect(manager.setAside.isEmpty, "\(manager.setAside)")
        }
    }

    @Test func whatCannotBeReadIsSetAsideKeptAndTheOtherAppsAreServed() async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }
        try await withManager(configuration: Configuration(), directory: directory) { (fixture: ManagerFixture) async throws in
            let manager = fixture.manager
            for app in [Self.mail, Self.notes] {
                _ = try await manager.register(
                    name: app.value, traits: AppTraits(), launchUnit: .keep, declarations: EventDeclarations(), uid: 0, limit: 10
                )
                try await self.post(manager, to: app, try EventKind("mail.received"), ["n": 1], policy: .latest)
                try await self.post(manager, to: app, try EventKind("chat.line"), ["n": 1], policy: .queue(bound: 10))
            }
        }
        // A row no daemon can read: a kind outside the grammar, as a damaged or hand-edited store has.
        let slot = #"{"policy":{"policy":"latest"},"count":1,"first":1,"last":1,"payload":{"n":9}}"#
        do {
            let pool = try DatabasePool(path: directory.file("coalesced.db"))
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO held (app, kind, position, slot) VALUES (?, 'Not A Kind', 9, ?)", arguments: [Self.mail.value, slot])
            }
            try pool.close()
        }

        let logs = LogCapture()
        try await withManager(configuration: Configuration(), directory: directory, logs: logs) { (fixture: ManagerFixture) async throws in
            let (manager, store) = (fixture.manager, fixture.store)
            #expect(try self.heldKinds(manager, Self.mail).isEmpty, "the app whose data cannot be read starts with nothing held")
            #expect(try self.heldKinds(manager, Self.notes) == ["mail.received": 1, "chat.line": 1], "the other app keeps what it holds")
            try await onThread { [manager] in
                try waitUntil("the set-aside to be on disk and summed") { manager.setAside.first?.app == Self.mail.value }
            }
            let summary = try #require(manager.setAside.first)
            #expect(manager.setAside.count == 1)
            #expect(summary.rows == 4, "the two held kinds, the unreadable one, and the queue entry")
            #expect(summary.reason == "what it holds of Not A Kind cannot be read")
            let logged = try #require(logs.entries.first { $0.metadata["message_id"] == "\(MessageID.heldDataSetAside)" })
            #expect(logged.level == .error && logged.metadata["app"] == "\(Self.mail)")

            // Kept as it was, and no longer in the app's tables: a new post of the kind starts afresh.
            let rows = try store.setAsideRows()
            #expect(rows.contains { $0.source == "held" && $0.row.contains("Not A Kind") && $0.row.contains(#"\"n\":9"#) }, "\(rows)")
            #expect(rows.contains { $0.source == "queued" })
            #expect(try store.heldRows().allSatisfy { $0.app == Self.notes.value })
            try await self.post(manager, to: Self.mail, try EventKind("mail.received"), ["n": 2], policy: .latest)
        }

        // The next start opens cleanly, serves the new post, and still shows what is set aside.
        try await withManager(configuration: Configuration(), directory: directory) { (fixture: ManagerFixture) async throws in
            let manager = fixture.manager
            #expect(try self.heldKinds(manager, Self.mail) == ["mail.received": 1])
            #expect(manager.setAside.map(\.app) == [Self.mail.value] && manager.setAside.first?.rows == 4)
        }
    }
}
