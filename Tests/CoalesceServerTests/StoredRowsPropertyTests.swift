import CoalesceCore
@testable import CoalesceServer
@testable import CoalesceStore
import CoalesceTestSupport

import Logging
import NIOEmbedded
import PropertyBased
import Testing
import Varlink

/// Every kind of row the daemon writes, filled with arbitrary strings of the kinds each field allows (names without
/// control characters, text without NUL, payloads with anything JSON holds), is read back after a restart as the
/// same value, by the same readers the daemon starts with: the app's registration, declarations and saved state;
/// what it holds (client and daemon kinds, every policy's slot, queue entries); events sent and not acknowledged;
/// netChange baselines; pending notification requests and the delivered list; journal watches added at run time.
/// A restart is the store closed and a new manager and notification center opened on its file.
@Suite struct StoredRowsPropertyTests {
    static let app = try! AppName("org.example.stored")
    /// The caller of the center's methods: root, whose every app is its own.
    static let root = VarlinkPeer(pid: Int32.max, uid: 0, gid: 0)

    /// The characters strings are made of: quotes, escapes, JSON's and SQL's specials, multi-byte and astral
    /// scalars, separators JSON writers trip on, and control characters (taken out where a field refuses them).
    static let alphabet: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "'", "%", "{", "}", "[", ",", ":", "/", ".", "=", "é", "ß", "日", "\u{1F98A}",
        "\u{2028}", "\u{FEFF}", "\u{10FFFF}", "\u{0}", "\n", "\t", "\u{1b}", "\u{7f}",
    ]

    /// Strings for one case, made from the generated codes.
    struct Strings {
        var codes: [[Int]]

        func raw(_ index: Int) -> String {
            var scalars = String.UnicodeScalarView()
            scalars.append(contentsOf: self.codes[index % self.codes.count].map { StoredRowsPropertyTests.alphabet[$0] })
            return String(scalars)
        }

        /// A name: no control character, at least one character.
        func name(_ index: Int) -> String {
            let text = String(String.UnicodeScalarView(self.raw(index).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }))
            return text.isEmpty ? "n" : text
        }

        /// Text: anything but NUL.
        func text(_ index: Int) -> String {
            String(String.UnicodeScalarView(self.raw(index).unicodeScalars.filter { $0.value != 0 }))
        }

        /// An event kind of the grammar: lower-case labels from the codes.
        func kind(_ index: Int) -> EventKind {
            let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
            let label = self.codes[index % self.codes.count].map { String(letters[$0 % letters.count]) }.joined()
            return try! EventKind("k\(index)." + (label.isEmpty ? "x" : label))
        }
    }

    /// A manager and a notification center over the store in `directory`, as a start makes them; closed after `body`.
    func withDaemon<T>(_ directory: TemporaryDirectory, _ body: (AppManager, NotificationCenter, Store) async throws -> T) async throws -> T {
        let loop = NIOAsyncTestingEventLoop()
        let store = try await openStore(directory)
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let daemon = DaemonState(configuration: Configuration())
        let manager = try AppManager(store: store, daemon: daemon, eventLoop: loop, logger: logger, startUnit: { _ in })
        let center = try NotificationCenter(store: store, apps: manager, daemon: daemon, logger: logger)
        try await center.start()
        let result: T
        do {
            result = try await body(manager, center, store)
        } catch {
            center.stop()
            try? await store.close()
            throw error
        }
        center.stop()
        try await store.close()
        await ManualClock(loop: loop).shutDown()
        return result
    }

    /// Posts as the daemon does and waits until the post is on disk.
    func post(_ manager: AppManager, _ kind: EventKind, _ payload: JSONValue, _ policy: CoalescingPolicy) async {
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let taken = manager.postFromDaemon(Self.app, kind: kind, payload: payload, policy: policy) { _, failure in
                continuation.resume(returning: failure.map { "\($0)" })
            }
            if !taken { continuation.resume(returning: "not taken") }
        }
        #expect(failure == nil, "the post of \(kind) was not kept: \(failure ?? "")")
    }

    func schedule(_ center: NotificationCenter, _ request: JSONValue) async throws {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<WallTime, NotificationError>, Never>) in
            do throws(NotificationError) {
                try center.schedule(app: Self.app.value, request: request, peer: Self.root) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        _ = try result.get()
    }

    /// What a start reads back, in the forms the daemon serves it.
    struct ReadBack: Equatable {
        var registration: AppRegistration?
        var declarations: JSONValue
        var savedState: String?
        var held: [String]
        var pending: [JSONValue]
        var delivered: [JSONObject]
        var deliveries: [JSONValue]
        var baselines: [String: JSONValue]
        var watches: [JournalWatch]
    }

    func readBack(_ manager: AppManager, _ center: NotificationCenter, _ store: Store) throws -> ReadBack {
        let (snapshot, declarations) = try manager.declared(Self.app.value)
        var deliveries: [JSONValue] = []
        try store.eachDeliveryRow { row in
            if let event = EventCoding.decodeEvent(row.event) { deliveries.append(EventCoding.event(event)) } else { deliveries.append(.null) }
        }
        var baselines: [String: JSONValue] = [:]
        for row in try store.baselineRows() { baselines[row.kind] = try JSONParser.parse(row.payload) }
        return ReadBack(
            registration: snapshot.registration,
            declarations: declarations.json,
            savedState: try store.savedState(of: Self.app),
            held: try manager.queue(of: Self.app.value).held.map { "\($0.kind) \(EventCoding.encode($0.slot))" },
            pending: try center.pending(app: Self.app.value, peer: Self.root).map { NotificationWire.json($0.request) },
            delivered: try center.delivered(app: Self.app.value, peer: Self.root).entries.map(\.entry),
            deliveries: deliveries,
            baselines: baselines,
            watches: try store.watchRows().map { row in
                try WatchDefinition.watch(from: try JSONParser.parse(row.definition).objectValue ?? [:])
            }
        )
    }

    @Test func everyRowTheDaemonWritesReadsBackAsTheSameValueAfterARestart() async {
        let codes = Gen.int(in: 0...(Self.alphabet.count - 1)).array(of: 0...12).array(of: 16)
        // The property checker does not report what its body throws: each case records its own error.
        await propertyCheck(count: 40, input: codes) { codes in
            do {
                try await self.roundTrip(Strings(codes: codes))
            } catch {
                // Printed too: the checker keeps a failing case's issues to itself while it shrinks.
                print("StoredRowsPropertyTests: a case threw: \(error)")
                Issue.record(error, "a case threw")
            }
        }
    }

    func roundTrip(_ strings: Strings) async throws {
        do {
            let directory = try TemporaryDirectory()
            defer { withExtendedLifetime(directory) {} }
            // At most 12 scalars of at most 4 bytes: within every field's bound.
            let sumField = strings.name(3)
            let written = try await self.withDaemon(directory) { manager, center, store in
                let declarations = try EventDeclarations(
                    kinds: [
                        strings.kind(0).value: ["policy": "sum", "field": .string(sumField)],
                        strings.kind(1).value: ["policy": "queue", "bound": 3],
                        strings.kind(2).value: ["policy": "netChange"],
                    ],
                    posters: nil,
                    topics: [.string(strings.kind(3).value)]
                )
                let modes = Set([strings.name(0), strings.name(1)])
                _ = try await manager.register(
                    name: Self.app.value, traits: AppTraits(backgroundModes: modes), launchUnit: .set(String(String.UnicodeScalarView(strings.name(2).unicodeScalars.filter { $0 != "/" })) + ".service", byAdmin: true),
                    windowIDs: [strings.name(8), strings.name(9)], declarations: declarations, uid: 0, limit: 10
                )
                try await manager.saveState(name: Self.app.value, uid: 0, data: strings.text(4))

                // Held: every policy's slot, a client's kinds and the daemon's own.
                let payload: JSONValue = [strings.raw(5): .string(strings.raw(6)), sumField: 2, "text": .string(strings.text(7))]
                await self.post(manager, strings.kind(0), payload, .sum(field: sumField))
                await self.post(manager, strings.kind(0), payload, .sum(field: sumField))
                for _ in 0..<4 { await self.post(manager, strings.kind(1), payload, .queue(bound: 3)) }
                await self.post(manager, strings.kind(2), payload, .netChange)
                await self.post(manager, strings.kind(4), payload, .merge)
                await self.post(manager, strings.kind(5), [strings.raw(8): .string(strings.raw(9))], .first)
                await self.post(manager, NotificationCenter.didReceiveResponse, payload, .queue(bound: 256))
                await self.post(manager, ClockZoneLocaleFollower.timeZoneChanged, ["timeZone": .string(strings.text(10))], .latest)

                // Sent and not acknowledged, and a baseline: rows as the inbox writes them.
                let event = EventCoding.Queue.Event(
                    kind: NotificationCenter.willPresent, payload: EventPayload(payload), count: 3, firstPosted: 1.5, lastPosted: 2.25, dropped: 1
                )
                let baseline: JSONValue = [strings.raw(11): .string(strings.raw(12))]
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    store.write(
                        [.delivery(event: EventCoding.event(event).jsonText), .baseline(kind: strings.kind(2).value, payload: baseline.jsonText)],
                        of: Self.app, together: false
                    ) { result in continuation.resume(with: result.map { _ in () }.mapError { $0 as any Error }) }
                }

                // A pending request with every member, and one presented at once (the delivered list).
                var content: JSONObject = [
                    "title": .string(strings.text(13)), "subtitle": .string(strings.text(14)), "body": .string(strings.text(15)),
                    "threadId": .string(strings.name(0)), "categoryId": .string(strings.name(1)),
                    "actions": [["id": .string("b" + strings.name(2)), "title": .string(strings.text(3)), "foreground": true]],
                    "userInfo": [strings.raw(5): .string(strings.raw(6))],
                ]
                try await self.schedule(center, ["id": .string(strings.name(7)), "trigger": ["after": 3600], "content": .object(content), "style": "alert"])
                content["sound"] = .string(strings.text(8))
                try await self.schedule(center, ["id": .string("now" + strings.name(9)), "content": .object(content), "late": "deliver"])
                // Presented once its write is on disk, after Schedule's answer.
                try await onThread {
                    try waitUntil("the notification to be in the delivered list") {
                        try center.delivered(app: Self.app.value, peer: Self.root).entries.count == 1
                    }
                }

                // A journal watch added at run time, with every member that holds text.
                let watch = try JournalWatch(
                    name: try WatchName("w" + strings.codes[10].map { String($0 % 10) }.joined()),
                    selection: {
                        var selection = JournalSelection()
                        selection.units = [strings.name(11)]
                        selection.identifiers = [strings.name(12)]
                        selection.fields = ["SYSLOG_FACILITY": [strings.text(13)]]
                        return selection
                    }(),
                    pattern: .contains(strings.name(14)), kind: strings.kind(6), target: .app(Self.app), policy: .count
                )
                try await store.addWatch(
                    Store.WatchRow(name: watch.name.value, definition: JSONValue.object(WatchDefinition.object(watch)).jsonText, owner: 0),
                    from: nil
                )
                // What was written: in memory as the daemon holds it, and the rows as they were given.
                var written = try self.readBack(manager, center, store)
                written.deliveries = [EventCoding.event(event)]
                written.baselines = [strings.kind(2).value: baseline]
                written.watches = [watch]
                return written
            }
            #expect(written.held.count == 7 && written.pending.count == 1 && written.delivered.count == 1 && written.watches.count == 1)
            let read = try await self.withDaemon(directory) { manager, center, store in try self.readBack(manager, center, store) }
            #expect(read == written, "read back after a restart differs from what was written")
        }
    }
}
