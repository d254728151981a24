import CoalesceCore
import Testing

/// The journal watches' positions on their own: a small journal, store and reader loop around the machine, run as
/// the follower runs it, and what each app received in the end. Entry `n` of the journal has sequence number `n`.
@Suite struct WatchPositionsTests {
    typealias Positions = WatchPositions<TestInstant, Int>

    static let errors = try! WatchName("errors")
    static let audit = try! WatchName("audit")
    static let monitor = try! AppName("org.example.monitor")
    static let pager = try! AppName("org.example.pager")

    static func cursor(_ n: Int) -> JournalCursor { JournalWatchTests.cursor(i: UInt64(n), m: UInt64(n), t: UInt64(n)) }

    static func watch(_ name: WatchName, kind: String = "log.errors") -> JournalWatch {
        let target = WatchTarget.topic(try! EventKind("log"))
        return try! JournalWatch(name: name, selection: JournalSelection(), kind: EventKind(kind), target: target)
    }

    static func at(_ milliseconds: Int) -> TestInstant { TestInstant.zero.advanced(by: .milliseconds(milliseconds)) }

    /// A watch and an app as the tests name them: `errors→monitor`.
    static func named(_ key: Positions.Batcher.Key) -> String {
        "\(key.watch)→\(key.app.value.split(separator: ".").last!)"
    }

    /// An action as the tests name it: `post errors→monitor 1×3`, `write errors 3`, `head`, `after 3`.
    static func described(_ actions: [Positions.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .post(let batch): "post \(Self.named(batch.key)) \(batch.entries)×\(batch.last)"
            case .writePosition(let watch, let cursor): "write \(watch) \(cursor.sequenceNumber)"
            case .seekHead: "head"
            case .seek(let cursor): "after \(cursor.sequenceNumber)"
            }
        }
    }

    // MARK: Restarts

    @Test func aRestartSkipsForEachWatchWhatItsOwnPositionCovers() {
        var rig = Rig([Self.errors, Self.audit])
        // No app answers to the audit watch's topic yet: it reads entries and posts them to no one.
        rig.recipients[Self.audit] = []
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...5)
        rig.pass()
        rig.answer()
        rig.tick(to: 1000)
        #expect(rig.own == [Self.errors: 5, Self.audit: 5], "both idle: each writes the reader's position")
        // The errors watch's app is slow: 6 and 7 are in flight at the crash, so it writes no position of its own.
        rig.write(6...7)
        rig.pass()
        rig.tick(to: 2000)
        #expect(rig.own == [Self.errors: 5, Self.audit: 7])

        // The pager subscribed meanwhile.
        rig.recipients[Self.audit] = [Self.pager]
        rig.restart()
        #expect(rig.seeks == ["after 5"], "the earliest position a watch needs")
        rig.pass()
        rig.answer()
        #expect(rig.read == [6, 7])
        rig.write(8...8)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5", "1×6", "1×7", "1×8"])
        #expect(rig.received["audit→pager"] == ["1×8"], "6 and 7 read again, skipped by the watch's own position")
    }

    @Test func aRestartSkipsForEachAppWhatItsLastKeptPostCovers() {
        var rig = Rig([Self.errors], to: [Self.monitor, Self.pager])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...4)
        rig.pass()
        // The monitor's writes are on disk; the pager's last two were not when the daemon was killed.
        rig.answer { $0.key.app == Self.monitor || $0.last <= 2 }
        #expect(rig.own.isEmpty, "never idle: no position of its own")
        #expect(rig.apps[Self.errors] == [Self.monitor: 4, Self.pager: 2])

        rig.restart()
        #expect(rig.seeks == ["after 2"], "only apps' positions: from the earliest of them")
        rig.pass()
        rig.answer()
        #expect(rig.read == [3, 4])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4"], "3 and 4 skipped for the monitor")
        #expect(rig.received["errors→pager"] == ["1×1", "1×2", "1×3", "1×4"], "3 and 4 posted again to the pager")
    }

    @Test func entriesFoldedAndNotYetPostedAreReadAgainAfterARestart() {
        var rig = Rig([Self.errors], interval: .seconds(10))
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1"], "2 and 3 fold until the window ends")
        rig.tick(to: 5000)
        #expect(rig.own.isEmpty, "a watch with entries folding writes no position of its own")

        rig.restart()
        rig.pass()
        rig.answer()
        rig.tick(to: 15_000)
        rig.answer()
        #expect(rig.read == [2, 3])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3"])
    }

    // MARK: Where reading starts

    struct SeekCase: Sendable, CustomTestStringConvertible {
        var name: String
        /// By watch: what the store holds, or where a new watch starts.
        var stored: [WatchName: Positions.Stored] = [:]
        var starts: [WatchName: WatchStart] = [:]
        var journal: [Int] = Array(1...9)
        var watches: [WatchName] = [errors]
        var expected: [String]
        var testDescription: String { self.name }
    }

    static let seekCases: [SeekCase] = [
        SeekCase(name: "its own position", stored: [errors: .init(own: cursor(5))], expected: ["after 5"]),
        SeekCase(
            name: "its own position, apps' behind it",
            stored: [errors: .init(own: cursor(5), apps: [monitor: cursor(3)])],
            expected: ["after 5"]
        ),
        SeekCase(
            name: "only apps' positions: the earliest",
            stored: [errors: .init(own: nil, apps: [monitor: cursor(7), pager: cursor(3)])],
            expected: ["after 3"]
        ),
        SeekCase(
            name: "a stored watch without a position reads from the head",
            stored: [errors: .init(own: nil)],
            expected: ["head"]
        ),
        SeekCase(name: "a new watch: the tail, written", expected: ["write errors 9", "after 9"]),
        SeekCase(name: "a new watch in an empty journal", journal: [], expected: ["head"]),
        SeekCase(name: "a new watch from the head", starts: [errors: .head], expected: ["head"]),
        SeekCase(
            name: "a new watch from a cursor",
            starts: [errors: .cursor(cursor(4).text)],
            expected: ["write errors 4", "after 4"]
        ),
        SeekCase(
            name: "a new watch from a time: the entry before it",
            starts: [errors: .time(realtimeMicroseconds: 6)],
            expected: ["write errors 5", "after 5"]
        ),
        SeekCase(
            name: "two watches: the earlier position",
            stored: [errors: .init(own: cursor(5)), audit: .init(own: cursor(2))],
            watches: [errors, audit],
            expected: ["after 2"]
        ),
        SeekCase(
            name: "two watches, one from the head",
            stored: [errors: .init(own: cursor(5))],
            starts: [audit: .head],
            watches: [errors, audit],
            expected: ["head"]
        ),
        SeekCase(
            name: "two new watches at the tail: one position each",
            watches: [errors, audit],
            expected: ["write errors 9", "write audit 9", "after 9"]
        ),
    ]

    @Test(arguments: seekCases) func whereReadingStarts(_ row: SeekCase) {
        var machine = Positions(interval: .zero, burst: 1, now: .zero)
        var tails = 0
        let actions = machine.change(
            to: row.watches.map { Self.watch($0) },
            stored: row.stored,
            starts: row.starts,
            tail: {
                tails += 1
                return row.journal.last.map(Self.cursor)
            },
            entryBefore: { time in row.journal.last(where: { $0 < Int(time) }).map(Self.cursor) }
        )
        #expect(Self.described(actions) == row.expected)
        #expect(tails <= 1, "the tail is looked up once")
    }

    // MARK: Rewinds

    @Test func aFailedWriteRewindsOnceNothingIsInFlightAndPostsTheRestOnce() {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...2)
        rig.pass()
        rig.answer()
        rig.tick(to: 1000)
        #expect(rig.own == [Self.errors: 2])
        rig.write(3...5)
        rig.pass()
        rig.answer { $0.last == 3 }
        rig.answer(failing: true) { $0.last == 4 }
        #expect(rig.rewinds == 0, "5 is still in flight")
        rig.tick(to: 2000)
        #expect(rig.own == [Self.errors: 2], "no position of its own written while a rewind waits")
        rig.answer(failing: true)
        #expect(rig.rewinds == 1)
        #expect(rig.seeks == ["head", "after 2"], "back to the positions on disk")

        rig.read = []
        rig.pass()
        rig.answer()
        #expect(rig.read == [3, 4, 5], "read again from the watch's own position")
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"], "3 skipped: it was kept")
    }

    @Test func aRewindForgetsWhatWasFoldingAndPostsItFromTheJournal() {
        var rig = Rig([Self.errors, Self.audit], interval: .seconds(10))
        rig.matches[Self.audit] = { $0 == 1 }
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        // The audit watch's one post fails; 2 and 3 of the errors watch are folding.
        rig.answer(failing: true) { $0.key.watch == Self.audit }
        rig.answer()
        #expect(rig.rewinds == 1)
        rig.pass()
        rig.answer()
        rig.tick(to: 10_000)
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3"], "2 and 3 once each, in a new window")
        #expect(rig.received["audit→monitor"] == ["1×1"])
    }

    @Test func nothingIsPostedWhileARewindWaitsForTheRestInFlight() {
        var rig = Rig([Self.errors, Self.audit])
        rig.recipients[Self.audit] = [Self.pager]
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...1)
        rig.pass()
        rig.answer(failing: true) { $0.key.watch == Self.errors }
        // The audit watch's post of 1 is still in flight; the monitor's 2, were it posted and kept, would put its
        // position past 1.
        rig.write(2...2)
        rig.pass()
        rig.answer()
        #expect(rig.rewinds == 1)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2"])
        #expect(rig.received["audit→pager"] == ["1×1", "1×2"])
    }

    // MARK: Idle writes

    @Test func idleWatchesWriteTheirPositionAtMostOnceASecond() {
        var rig = Rig([Self.errors, Self.audit], interval: .seconds(10))
        rig.matches[Self.errors] = { $0 != 2 }
        rig.matches[Self.audit] = { $0 == 2 }
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...1)
        rig.pass()
        rig.answer()
        rig.tick(to: 999)
        #expect(rig.own.isEmpty, "not before a second")
        rig.tick(to: 1000)
        #expect(rig.own == [Self.errors: 1, Self.audit: 1])

        rig.write(2...2)
        rig.pass()
        rig.tick(to: 2000)
        #expect(rig.own == [Self.errors: 2, Self.audit: 1], "the audit watch has a post in flight")
        rig.answer()
        rig.write(3...4)
        rig.pass()
        rig.tick(to: 2500)
        #expect(rig.own == [Self.errors: 2, Self.audit: 1], "half a second after the last")
        rig.tick(to: 3000)
        #expect(rig.own == [Self.errors: 2, Self.audit: 4], "the errors watch has 3 and 4 folding")
        rig.tick(to: 12_000)
        #expect(rig.own == [Self.errors: 2, Self.audit: 4], "their batch is in flight")
        rig.answer()
        rig.tick(to: 13_000)
        #expect(rig.own == [Self.errors: 4, Self.audit: 4])
        #expect(rig.received["errors→monitor"] == ["1×1", "2×4"])
        #expect(rig.received["audit→monitor"] == ["1×2"])
    }

    @Test func aWatchBehindItsPositionWritesNone() {
        var machine = Positions(interval: .zero, burst: 1, now: .zero)
        let actions = machine.change(
            to: [Self.watch(Self.errors), Self.watch(Self.audit)],
            stored: [Self.errors: .init(own: Self.cursor(5)), Self.audit: .init(own: Self.cursor(2))],
            starts: [:],
            tail: { nil },
            entryBefore: { _ in nil }
        )
        #expect(Self.described(actions) == ["after 2"])
        for n in 3...4 {
            _ = machine.reads(Self.audit, entry: { Self.cursor(n) })
            let reads = machine.reads(Self.errors, entry: { Self.cursor(n) })
            #expect(!reads, "entry \(n) is before its position")
        }
        machine.passEnded(at: Self.cursor(4))
        #expect(Self.described(machine.idle(at: Self.at(1000))) == ["write audit 4"], "errors has not reached 5")
    }
}
