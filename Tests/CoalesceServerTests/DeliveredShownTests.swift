@testable import CoalesceStore
import CoalesceTestSupport
import GRDB
import Testing

/// Whether the desktop owes a delivered entry anything (`alertDelivered.shown`): kept across restarts, set by a
/// write after the entry's own, and, for the entries of a store older than the column, taken as shown, so that an
/// upgrade does not send them all to the next agent.
@Suite struct DeliveredShownTests {
    static let app = "org.example.old"

    static func row(_ serial: Int64, shown: Bool = false) -> Store.AlertDeliveredRow {
        Store.AlertDeliveredRow(app: Self.app, serial: serial, entry: "{}", shown: shown)
    }

    @Test func anOlderStoresEntriesAreShownNewOnesAreNotUntilMarked() async throws {
        let directory = try TemporaryDirectory()
        do {
            // A store as the version before the column left it, with one delivered entry.
            let database = try DatabaseQueue(path: directory.file("coalesced.db"))
            try Store.migrator.migrate(database, upTo: "9: rows set aside")
            try await database.write { db in
                try db.execute(
                    sql: "INSERT INTO app (name, owner, backgroundModes, exitsOnSuspend) VALUES (?, 1000, '', 0)",
                    arguments: [Self.app]
                )
                try db.execute(sql: "INSERT INTO alertDelivered (app, serial, entry) VALUES (?, 1, '{}')", arguments: [Self.app])
            }
        }
        do {
            let store = try await openStore(directory)
            #expect(try store.alertDeliveredRows() == [Self.row(1, shown: true)])

            var delivered = Store.AlertChange()
            delivered.deliver = [Self.row(2), Self.row(3)]
            try await store.write(delivered).wait()
            #expect(try store.alertDeliveredRows() == [Self.row(1, shown: true), Self.row(2), Self.row(3)])

            // An entry gone meanwhile (serial 9) is skipped; the others are marked.
            var shown = Store.AlertChange()
            shown.shown = [(Self.app, 3), (Self.app, 9)]
            #expect(!shown.isEmpty)
            try await store.write(shown).wait()
            #expect(try store.alertDeliveredRows() == [Self.row(1, shown: true), Self.row(2), Self.row(3, shown: true)])
            try await store.close()
        }
        let reopened = try await openStore(directory)
        #expect(try reopened.alertDeliveredRows() == [Self.row(1, shown: true), Self.row(2), Self.row(3, shown: true)])
        try await reopened.close()
    }
}
