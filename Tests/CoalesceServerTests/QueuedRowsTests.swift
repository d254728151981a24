import CoalesceCore
@testable import CoalesceServer
@testable import CoalesceStore
import CoalesceTestSupport
import Foundation
import GRDB
import Testing
import Varlink

/// A queue kind's entries as the store keeps them, one row each, against real SQLite in a temporary state directory.
@Suite struct QueuedRowsTests {
    let mail = try! AppName("org.example.mail")

    /// Writes `rows` for the app and waits for the store's answer.
    func write(_ rows: [EventRow], _ store: Store) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            store.write(rows, of: self.mail, together: false) { result in
                continuation.resume(with: result.map { _ in () }.mapError { $0 as any Error })
            }
        }
    }

    @Test func aPostAppendsOneRowAndTheOldestAreDroppedBySerial() async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }
        let store = try await onThread { try Store(stateDirectory: directory.path) }
        try await store.save(AppRegistration(name: self.mail, owner: 0))
        let slot = #"{"policy":{"policy":"queue","bound":2},"count":3,"first":1,"last":3,"dropped":1}"#
        try await self.write(
            (1...3).map { .enqueue(kind: "chat", serial: $0, posted: Double($0), payload: #"{"n":\#($0)}"#) }
                + [.hold(kind: "chat", position: 0, slot: slot), .dropQueued(kind: "chat", before: 2)],
            store
        )
        #expect(try store.queuedRows().map(\.serial) == [2, 3])
        #expect(try store.queuedRows().map(\.payload) == [#"{"n":2}"#, #"{"n":3}"#])
        try await self.write([.clearHeld], store)
        #expect(try store.queuedRows().isEmpty && store.heldRows().isEmpty, "a delivery forgets the entries with the slots")
    }

    /// A store whose queue kinds kept their entries in a list in the kind's slot is brought to one row per entry,
    /// numbered so that the last entry is the kind's last post, with payloads as they were.
    @Test func aStoreWithQueueListsInItsSlotsGetsOneRowPerEntry() async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }
        let path = directory.file("coalesced.db")
        do {
            let pool = try DatabasePool(path: path)
            try Store.migrator.migrate(pool, upTo: "4: app states")
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO app (name, owner, backgroundModes, exitsOnSuspend) VALUES (?, 0, '', 0)", arguments: [self.mail.value])
                try db.execute(
                    sql: "INSERT INTO held (app, kind, position, slot) VALUES (?, 'chat', 0, ?), (?, 'badge', 1, ?)",
                    arguments: [
                        self.mail.value,
                        #"{"policy":{"policy":"queue","bound":2},"count":5,"first":1.5,"last":5.5,"list":[{"payload":{"n":4,"text":"a \"b\""},"posted":4.5},{"payload":"five","posted":5.5}],"dropped":3}"#,
                        self.mail.value,
                        #"{"policy":{"policy":"sum","field":"unread"},"count":2,"first":1,"last":2,"sum":7}"#,
                    ]
                )
            }
            try pool.close()
        }
        let store = try await onThread { try Store(stateDirectory: directory.path) }
        let rows = try store.queuedRows()
        #expect(rows.map(\.serial) == [4, 5])
        #expect(rows.map(\.posted) == [4.5, 5.5])
        #expect(rows.map { try? JSONParser.parse($0.payload) } == [["n": 4, "text": #"a "b""#], "five"])
        let slots = try store.heldRows().sorted { $0.position < $1.position }.map { EventCoding.decodeSlot($0.slot) }
        guard case .queue(let dropped)? = slots.first??.held else { Issue.record("the queue kind's slot: \(slots)"); return }
        #expect(dropped == 3 && slots.first??.count == 5)
        #expect(!(try store.heldRows().first { $0.kind == "chat" }!.slot.contains("list")), "the list is gone from the slot")
        guard case .sum(let sum)? = slots.last??.held else { Issue.record("the sum kind's slot: \(slots)"); return }
        #expect(sum == 7, "other kinds are left as they were")
    }
}
