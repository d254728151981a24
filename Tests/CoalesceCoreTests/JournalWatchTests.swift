import CoalesceCore
import PropertyBased
import Testing

/// An entry as a watch reads it: its fields by name.
private func entry(_ fields: [String: String]) -> (String) -> String? { { fields[$0] } }

/// The pure parts of a journal watch: its name, which entries it takes (as sd-journal would be asked for them and as
/// each entry is tested), its bounds, and how cursors are read and ordered.
@Suite struct JournalWatchTests {
    let kind = try! EventKind("log.nginx.errors")
    let monitor = WatchTarget.app(try! AppName("org.example.monitor"))

    // MARK: Names

    @Test(arguments: ["nginx-errors", "a", "A.b_c@d-1", "0day", "user@1000.service", String(repeating: "w", count: 64)])
    func aWatchNameIsLettersDigitsAndFourMarks(_ name: String) throws {
        #expect(try WatchName(name).value == name)
    }

    @Test(arguments: ["", "-lead", "_lead", ".lead", "@lead", "has space", "a/b", "a:b", "é", "a\0", String(repeating: "w", count: 65)])
    func anyOtherNameIsRefusedSayingWhatANameIs(_ name: String) {
        #expect(
            throws: WatchProblem(
                watch: name, reason: "a watch's name is 1 to 64 letters, digits, '-', '_', '.' or '@', starting with a letter or digit"
            )
        ) { try WatchName(name) }
    }

    // MARK: Which entries

    @Test func unitsAndUserUnitsAreOneSourceAnEntryOfEitherIsTaken() {
        var selection = JournalSelection()
        selection.units = ["nginx.service", "php-fpm.service"]
        selection.userUnits = ["app.service"]
        #expect(selection.admits(entry(["_SYSTEMD_UNIT": "nginx.service"])))
        #expect(selection.admits(entry(["_SYSTEMD_UNIT": "php-fpm.service"])))
        #expect(selection.admits(entry(["_SYSTEMD_UNIT": "user@1000.service", "_SYSTEMD_USER_UNIT": "app.service"])))
        #expect(!selection.admits(entry(["_SYSTEMD_UNIT": "sshd.service"])))
        #expect(!selection.admits(entry(["_SYSTEMD_UNIT": "app.service"])), "a user unit's name as a system unit is another unit")
        #expect(!selection.admits(entry(["_SYSTEMD_USER_UNIT": "nginx.service"])), "and a system unit's as a user unit")
        #expect(!selection.admits(entry([:])), "an entry without a unit is of none of them")
    }

    @Test func identifiersAreAlternativesAndApplyWithTheUnits() {
        var selection = JournalSelection()
        selection.identifiers = ["sshd", "sudo"]
        #expect(selection.admits(entry(["SYSLOG_IDENTIFIER": "sshd"])))
        #expect(selection.admits(entry(["SYSLOG_IDENTIFIER": "sudo"])))
        #expect(!selection.admits(entry(["SYSLOG_IDENTIFIER": "cron"])))
        #expect(!selection.admits(entry(["_SYSTEMD_UNIT": "sshd.service"])), "no identifier")
        selection.units = ["ssh.service"]
        #expect(selection.admits(entry(["_SYSTEMD_UNIT": "ssh.service", "SYSLOG_IDENTIFIER": "sshd"])))
        #expect(!selection.admits(entry(["_SYSTEMD_UNIT": "cron.service", "SYSLOG_IDENTIFIER": "sshd"])), "the unit applies too")
        #expect(!selection.admits(entry(["_SYSTEMD_UNIT": "ssh.service", "SYSLOG_IDENTIFIER": "cron"])), "and the identifier")
    }

    @Test func aPriorityIsACeilingErrTakesEmergToErr() {
        var selection = JournalSelection()
        selection.priority = JournalSelection.priority(parsing: "err")
        #expect(selection.priority == 3)
        for priority in 0...3 { #expect(selection.admits(entry(["PRIORITY": "\(priority)"])), "priority \(priority)") }
        for priority in 4...7 { #expect(!selection.admits(entry(["PRIORITY": "\(priority)"])), "priority \(priority)") }
        #expect(!selection.admits(entry([:])), "an entry without a priority is not known to be urgent")
        #expect(!selection.admits(entry(["PRIORITY": "error"])), "nor one whose priority is not a number")
        selection.priority = 0
        #expect(selection.admits(entry(["PRIORITY": "0"])) && !selection.admits(entry(["PRIORITY": "1"])))
    }

    @Test(arguments: [
        ("emerg", 0), ("alert", 1), ("crit", 2), ("err", 3), ("ERR", 3), ("warning", 4), ("notice", 5), ("info", 6), ("debug", 7),
        ("0", 0), ("7", 7),
    ])
    func priorityNamesAndNumbersAreJournalctls(_ text: String, _ level: Int) {
        #expect(JournalSelection.priority(parsing: text) == level)
    }

    @Test(arguments: ["8", "-1", "error", "warn", ""])
    func otherPrioritiesAreNotOnes(_ text: String) {
        #expect(JournalSelection.priority(parsing: text) == nil)
    }

    @Test func valuesOfOneFieldAreAlternativesDifferentFieldsAllApply() {
        var selection = JournalSelection()
        selection.fields = ["CODE_FILE": ["a.c", "b.c"], "_UID": ["0"]]
        #expect(selection.admits(entry(["CODE_FILE": "a.c", "_UID": "0"])))
        #expect(selection.admits(entry(["CODE_FILE": "b.c", "_UID": "0"])))
        #expect(!selection.admits(entry(["CODE_FILE": "c.c", "_UID": "0"])))
        #expect(!selection.admits(entry(["CODE_FILE": "a.c", "_UID": "1000"])))
        #expect(!selection.admits(entry(["CODE_FILE": "a.c"])), "an entry missing a field matched is not taken")
    }

    @Test func anEmptySelectionTakesEverythingAndAsksSdJournalForOneEmptyGroup() {
        let selection = JournalSelection()
        #expect(selection.isEverything)
        #expect(selection.admits(entry([:])))
        #expect(selection.matchGroups == [[]])
        #expect(selection.fieldNames == [])
    }

    @Test func sdJournalGetsAGroupPerSourceEachWithTheCommonTerms() {
        var selection = JournalSelection()
        selection.units = ["a.service", "b.service"]
        selection.userUnits = ["u.service"]
        selection.identifiers = ["id"]
        selection.priority = 1
        selection.fields = ["_UID": ["0"], "CODE_FILE": ["x.c"]]
        let common = ["SYSLOG_IDENTIFIER=id", "PRIORITY=0", "PRIORITY=1", "CODE_FILE=x.c", "_UID=0"]
        #expect(
            selection.matchGroups == [
                ["_SYSTEMD_UNIT=a.service", "_SYSTEMD_UNIT=b.service"] + common,
                ["_SYSTEMD_USER_UNIT=u.service"] + common,
            ]
        )
        #expect(selection.fieldNames == ["_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT", "SYSLOG_IDENTIFIER", "PRIORITY", "CODE_FILE", "_UID"])
        selection.userUnits = []
        #expect(selection.matchGroups == [["_SYSTEMD_UNIT=a.service", "_SYSTEMD_UNIT=b.service"] + common], "one source, one group")
        selection.units = []
        #expect(selection.matchGroups == [common], "no source: the common terms as one group")
    }

    /// Whether sd-journal, given `groups` (each group's terms ANDed across fields and ORed within one, the groups
    /// ORed), returns the entry.
    static func sdJournalReturns(_ groups: [[String]], _ fields: [String: String]) -> Bool {
        groups.contains { group in
            Dictionary(grouping: group) { String($0[..<$0.firstIndex(of: "=")!]) }.allSatisfy { field, terms in
                fields[field].map { terms.contains("\(field)=\($0)") } ?? false
            }
        }
    }

    /// For random selections and entries drawn from small pools, what sd-journal returns for the match groups is
    /// exactly what ``JournalSelection/admits(_:)`` takes: the reader's own test never disagrees with the journal's.
    @Test func theMatchGroupsAndTheEntryTestAgree() async {
        await propertyCheck(count: 400, input: Gen.int(in: 0...4095).array(of: 1...12)) { codes in
            let units = ["a.service", "b.service"]
            let identifiers = ["x", "y"]
            var selection = JournalSelection()
            // The first code shapes the selection, the others are entries.
            let shape = codes[0]
            if shape & 1 != 0 { selection.units = [units[0]] }
            if shape & 2 != 0 { selection.units.append(units[1]) }
            if shape & 4 != 0 { selection.userUnits = [units[1]] }
            if shape & 8 != 0 { selection.identifiers = [identifiers[0]] }
            if shape & 16 != 0 { selection.priority = (shape >> 5) % 8 }
            if shape & 256 != 0 { selection.fields["_UID"] = ["0", "1"] }
            if shape & 512 != 0 { selection.fields["CODE_LINE"] = ["7"] }
            for code in codes.dropFirst() {
                var fields: [String: String] = [:]
                if code % 3 != 0 { fields["_SYSTEMD_UNIT"] = units[code % 3 - 1] }
                if (code / 3) % 3 != 0 { fields["_SYSTEMD_USER_UNIT"] = units[(code / 3) % 3 - 1] }
                if (code / 9) % 3 != 0 { fields["SYSLOG_IDENTIFIER"] = identifiers[(code / 9) % 3 - 1] }
                if (code / 27) % 9 != 8 { fields["PRIORITY"] = "\((code / 27) % 9)" }
                if (code / 243) % 3 != 2 { fields["_UID"] = "\((code / 243) % 3)" }
                if (code / 729) % 2 == 0 { fields["CODE_LINE"] = "7" }
                #expect(
                    selection.admits(entry(fields)) == Self.sdJournalReturns(selection.matchGroups, fields),
                    "selection \(selection), entry \(fields)"
                )
            }
        }
    }

    // MARK: Bounds

    private func watch(
        _ selection: JournalSelection = JournalSelection(), pattern: MessagePattern? = nil, fields: [String] = JournalWatch.defaultFields
    ) throws(WatchProblem) -> JournalWatch {
        try JournalWatch(name: WatchName("w"), selection: selection, pattern: pattern, kind: self.kind, target: self.monitor, fields: fields)
    }

    @Test func aWatchTakesAtMost64MatchValuesInAll() throws {
        var selection = JournalSelection()
        selection.units = (0..<30).map { "u\($0).service" }
        selection.userUnits = (0..<10).map { "v\($0).service" }
        selection.identifiers = (0..<10).map { "i\($0)" }
        selection.fields = ["_UID": (0..<14).map { "\($0)" }]
        _ = try self.watch(selection)
        selection.fields["_GID"] = ["0"]
        #expect(throws: WatchProblem(watch: "w", reason: "65 match values; a watch takes at most 64")) { try self.watch(selection) }
    }

    @Test(arguments: [
        ("lower", "a journal field name is upper-case letters, digits and '_', not starting with a digit"),
        ("1ABC", "a journal field name is upper-case letters, digits and '_', not starting with a digit"),
        ("A-B", "a journal field name is upper-case letters, digits and '_', not starting with a digit"),
        ("", "a journal field name is 1 to 64 characters"),
        (String(repeating: "A", count: 65), "a journal field name is 1 to 64 characters"),
    ])
    func aMatchOnWhatIsNotAFieldNameIsRefused(_ field: String, _ reason: String) {
        var selection = JournalSelection()
        selection.fields = [field: ["x"]]
        #expect(throws: WatchProblem(watch: "w", reason: "match on '\(field)': \(reason)")) { try self.watch(selection) }
    }

    @Test func unitsAndIdentifiersAreOneTo256Bytes() throws {
        var selection = JournalSelection()
        selection.identifiers = [String(repeating: "i", count: 256)]
        _ = try self.watch(selection)
        selection.units = [""]
        #expect(throws: WatchProblem(watch: "w", reason: "a unit or identifier must be 1 to 256 bytes without control characters: ''")) {
            try self.watch(selection)
        }
        selection.units = []
        selection.priority = 8
        #expect(throws: WatchProblem(watch: "w", reason: "priority 8 is not 0 (emerg) to 7 (debug)")) { try self.watch(selection) }
    }

    @Test func aMessagePatternIsOneTo256Bytes() throws {
        _ = try self.watch(pattern: .regex(String(repeating: "a", count: 256)))
        _ = try self.watch(pattern: .contains("x"))
        #expect(throws: WatchProblem(watch: "w", reason: "a message pattern is 1 to 256 bytes without NUL; this one is 257")) {
            try self.watch(pattern: .regex(String(repeating: "a", count: 257)))
        }
        #expect(throws: WatchProblem(watch: "w", reason: "a message pattern is 1 to 256 bytes without NUL; this one is 0")) {
            try self.watch(pattern: .contains(""))
        }
    }

    @Test func eventsCarryOneTo16FieldsEachAFieldName() throws {
        let sixteen = (0..<16).map { "F\($0)" }
        _ = try self.watch(fields: sixteen)
        _ = try self.watch(fields: ["__CURSOR", "__MONOTONIC_TIMESTAMP", "_HOSTNAME"])
        #expect(throws: WatchProblem(watch: "w", reason: "a watch's events carry 1 to 16 fields; 17 were named")) {
            try self.watch(fields: sixteen + ["MESSAGE"])
        }
        #expect(throws: WatchProblem(watch: "w", reason: "a watch's events carry 1 to 16 fields; 0 were named")) {
            try self.watch(fields: [])
        }
        #expect(
            throws: WatchProblem(watch: "w", reason: "field 'message': a journal field name is upper-case letters, digits and '_', not starting with a digit")
        ) { try self.watch(fields: ["message"]) }
    }

    @Test func anEntryIsReadForWhatTestsItThenWhatItsEventsCarry() throws {
        var selection = JournalSelection()
        selection.units = ["nginx.service"]
        selection.priority = 3
        let watch = try self.watch(selection, pattern: .regex("upstream"))
        #expect(watch.neededFields == ["_SYSTEMD_UNIT", "PRIORITY", "MESSAGE", "_PID", "__REALTIME_TIMESTAMP", "__CURSOR"])
    }

    @Test func aTargetIsAnAppOrATopic() throws {
        #expect(try WatchTarget(parsing: "org.example.monitor") == self.monitor)
        #expect(try WatchTarget(parsing: "topic:alerts.disk") == .topic(EventKind("alerts.disk")))
        #expect(try WatchTarget(parsing: "topic:alerts.disk").description == "topic:alerts.disk")
        #expect(self.monitor.description == "org.example.monitor")
        #expect(throws: WatchProblem.Reason.self) { try WatchTarget(parsing: "topic:") }
        #expect(throws: WatchProblem.Reason.self) { try WatchTarget(parsing: "monitor") }
    }

    // MARK: Cursors

    static let realCursor =
        "s=4b6a1c2d3e4f40a1b2c3d4e5f6a7b8c9;i=1a2b;b=0f1e2d3c4b5a49687786950a1b2c3d4e;m=3b9aca00;t=5f0c1a2b3c4d5;x=8a9b0c1d2e3f4a5b"

    @Test func aCursorIsReadForItsPlaceNumbersInHexadecimal() throws {
        let cursor = try #require(JournalCursor(Self.realCursor))
        #expect(cursor.text == Self.realCursor && cursor.description == Self.realCursor)
        #expect(cursor.sequenceID == "4b6a1c2d3e4f40a1b2c3d4e5f6a7b8c9")
        #expect(cursor.sequenceNumber == 0x1a2b)
        #expect(cursor.bootID == "0f1e2d3c4b5a49687786950a1b2c3d4e")
        #expect(cursor.monotonic == 1_000_000_000)
        #expect(cursor.realtime == 0x5f0c1a2b3c4d5)
        #expect(JournalCursor("t=1;m=2;b=b;i=3;s=s")?.sequenceNumber == 3, "in any order, without x=")
    }

    @Test(arguments: [
        "", "garbage", "s=a;i=1;b=b;m=1", "s=a;i=zz;b=b;m=1;t=1", "s=a;i=1;b=b;m=1;t=-1", "s=a;i;b=b;m=1;t=1", "s=a;ix1;b=b;m=1;t=1",
    ])
    func textThatIsNotACursorIsNotOne(_ text: String) {
        #expect(JournalCursor(text) == nil)
    }

    static func cursor(s: String = "s1", i: UInt64 = 1, b: String = "b1", m: UInt64 = 1, t: UInt64 = 1) -> JournalCursor {
        JournalCursor("s=\(s);i=\(String(i, radix: 16));b=\(b);m=\(String(m, radix: 16));t=\(String(t, radix: 16));x=0")!
    }

    @Test func inOneSequenceTheSequenceNumberOrders() {
        let earlier = Self.cursor(i: 0x9, m: 50, t: 50)
        let later = Self.cursor(i: 0x10, m: 5, t: 5)
        #expect(later.isAfter(earlier) && !earlier.isAfter(later), "0x10 after 0x9, whatever the times say")
        #expect(!later.isAfter(later), "an entry is not after itself")
    }

    @Test func inOneBootTheMonotonicTimeOrders() {
        let earlier = Self.cursor(s: "s1", i: 90, m: 0xff, t: 90)
        let later = Self.cursor(s: "s2", i: 1, m: 0x100, t: 1)
        #expect(later.isAfter(earlier) && !earlier.isAfter(later))
    }

    @Test func elseTheWallClockTimeOrders() {
        let earlier = Self.cursor(s: "s1", i: 90, b: "b1", m: 90, t: 1_000)
        let later = Self.cursor(s: "s2", i: 1, b: "b2", m: 1, t: 1_001)
        #expect(later.isAfter(earlier) && !earlier.isAfter(later))
    }

    @Test func theLaterOfTwoPositionsNoneBeingBeforeEverything() {
        let earlier = Self.cursor(i: 1)
        let later = Self.cursor(i: 2)
        #expect(JournalCursor.later(earlier, later) == later)
        #expect(JournalCursor.later(later, earlier) == later)
        #expect(JournalCursor.later(nil, earlier) == earlier)
        #expect(JournalCursor.later(earlier, nil) == earlier)
        #expect(JournalCursor.later(nil, nil) == nil)
    }
}

extension JournalWatchTests {
    /// The flood bound: what a watch's matched entries become as posts to one app, on a test's clock.
    @Suite struct Batcher {
        typealias TestBatcher = WatchBatcher<TestInstant, Int>

        static let errors = try! WatchName("errors")
        static let audit = try! WatchName("audit")
        static let monitor = try! AppName("org.example.monitor")
        static let pager = try! AppName("org.example.pager")
        let key = TestBatcher.Key(watch: Self.errors, app: Self.monitor)

        static func at(_ milliseconds: Int) -> TestInstant { TestInstant.zero.advanced(by: .milliseconds(milliseconds)) }

        /// Entry `n` of the journal, whose cursor has sequence number `n`.
        static func cursor(_ n: Int) -> JournalCursor { JournalWatchTests.cursor(i: UInt64(n)) }

        /// A post as `entries×last` (its cursor checked to be the last entry's), prefixed with its key when not
        /// the errors watch's to the monitor.
        static func described(_ batches: [TestBatcher.Batch]) -> [String] {
            batches.map { batch in
                #expect(batch.cursor == Self.cursor(batch.last), "a batch carries its last entry's cursor")
                let prefix = batch.key == TestBatcher.Key(watch: Self.errors, app: Self.monitor) ? "" : "\(batch.key.watch)→\(batch.key.app): "
                return "\(prefix)\(batch.entries)×\(batch.last)"
            }
        }

        static func add(
            _ batcher: inout TestBatcher, _ key: TestBatcher.Key, _ n: Int, queue: Bool = false, at milliseconds: Int
        ) -> [String] {
            Self.described(batcher.add(key, n, cursor: Self.cursor(n), queue: queue, at: Self.at(milliseconds)))
        }

        static func due(_ batcher: inout TestBatcher, at milliseconds: Int) -> [String] {
            Self.described(batcher.due(at: Self.at(milliseconds)))
        }

        @Test func aQuietWatchPostsEachEntryAtOnce() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 10)
            #expect(Self.add(&batcher, self.key, 1, at: 0) == ["1×1"])
            #expect(Self.due(&batcher, at: 100) == [], "nothing waited")
            #expect(Self.add(&batcher, self.key, 2, at: 150) == ["1×2"])
            #expect(Self.add(&batcher, self.key, 3, at: 400) == ["1×3"])
            #expect(!batcher.hasPending(Self.errors) && batcher.nextDue == nil)
        }

        @Test func aFloodPostsItsFirstEntryAtOnceAndTheRestAsOneBatchWhenTheIntervalEnds() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 10)
            #expect(Self.add(&batcher, self.key, 1, at: 0) == ["1×1"])
            for n in 2...5 { #expect(Self.add(&batcher, self.key, n, at: n * 10) == []) }
            #expect(batcher.hasPending(Self.errors))
            #expect(batcher.nextDue == Self.at(100))
            #expect(Self.due(&batcher, at: 99) == [])
            #expect(Self.due(&batcher, at: 100) == ["4×5"], "four entries, the last of them")
            #expect(!batcher.hasPending(Self.errors) && batcher.nextDue == nil)
            // The batch was the new window's post: an entry in it waits for its end.
            #expect(Self.add(&batcher, self.key, 6, at: 150) == [])
            #expect(batcher.nextDue == Self.at(200))
            #expect(Self.due(&batcher, at: 200) == ["1×6"])
            #expect(Self.due(&batcher, at: 300) == [], "a window without entries")
            #expect(Self.add(&batcher, self.key, 7, at: 310) == ["1×7"], "quiet for a window: at once again")
        }

        @Test func anEntryAfterTheWindowEndedPostsTheWaitingBatchFirst() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 10)
            _ = Self.add(&batcher, self.key, 1, at: 0)
            #expect(Self.add(&batcher, self.key, 2, at: 50) == [])
            #expect(Self.add(&batcher, self.key, 3, at: 120) == ["1×2"], "the timer was late: the batch goes, entry 3 waits")
            #expect(batcher.nextDue == Self.at(220))
            #expect(Self.due(&batcher, at: 220) == ["1×3"])
        }

        @Test func aQueueWatchPostsUpToItsBurstAtOnceThenFolds() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 3)
            var posted: [String] = []
            for n in 1...5 { posted += Self.add(&batcher, self.key, n, queue: true, at: n) }
            #expect(posted == ["1×1", "1×2", "1×3"])
            #expect(Self.due(&batcher, at: 101) == ["2×5"])
            posted = []
            for n in 6...8 { posted += Self.add(&batcher, self.key, n, queue: true, at: 100 + n) }
            #expect(posted == ["1×6", "1×7"], "the batch was one of the new window's three")
            #expect(Self.due(&batcher, at: 201) == ["1×8"])
        }

        @Test func aBurstBelowOneIsOne() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 0)
            #expect(batcher.burst == 1)
            #expect(Self.add(&batcher, self.key, 1, queue: true, at: 0) == ["1×1"])
            #expect(Self.add(&batcher, self.key, 2, queue: true, at: 1) == [])
        }

        @Test func eachWatchAndAppHasItsOwnWindow() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 10)
            let toPager = TestBatcher.Key(watch: Self.errors, app: Self.pager)
            let audit = TestBatcher.Key(watch: Self.audit, app: Self.monitor)
            #expect(Self.add(&batcher, self.key, 1, at: 0) == ["1×1"])
            #expect(Self.add(&batcher, self.key, 2, at: 1) == [])
            #expect(Self.add(&batcher, toPager, 2, at: 1) == ["errors→org.example.pager: 1×2"], "the same entry to another app")
            #expect(Self.add(&batcher, audit, 3, at: 2) == ["audit→org.example.monitor: 1×3"])
            #expect(Self.add(&batcher, audit, 4, at: 50) == [])
            #expect(batcher.hasPending(Self.errors) && batcher.hasPending(Self.audit))
            #expect(Self.due(&batcher, at: 101).sorted() == ["1×2"])
            #expect(batcher.nextDue == Self.at(102))
            #expect(Self.due(&batcher, at: 102) == ["audit→org.example.monitor: 1×4"])
        }

        @Test func aWatchForgottenLeavesNothingWaitingAndStartsAfresh() {
            var batcher = TestBatcher(interval: .milliseconds(100), burst: 10)
            let audit = TestBatcher.Key(watch: Self.audit, app: Self.monitor)
            _ = Self.add(&batcher, self.key, 1, at: 0)
            _ = Self.add(&batcher, self.key, 2, at: 10)
            _ = Self.add(&batcher, audit, 3, at: 20)
            _ = Self.add(&batcher, audit, 4, at: 30)
            batcher.forget(Self.errors)
            #expect(!batcher.hasPending(Self.errors) && batcher.hasPending(Self.audit))
            #expect(batcher.nextDue == Self.at(120), "the audit watch's window only")
            #expect(Self.add(&batcher, self.key, 5, at: 40) == ["1×5"], "a window of its own from scratch")
            batcher.forget()
            #expect(!batcher.hasPending(Self.audit) && batcher.nextDue == nil)
            #expect(Self.due(&batcher, at: 1_000) == [])
        }

        /// Random arrivals on four keys (two coalescing, two queue), with the timer on time or late: every entry is
        /// posted once, in order, in batches that account for each; a coalescing key posts at most once per
        /// interval and a queue key at most its burst per window (so at most twice that less one in any interval,
        /// and one window's more in each further interval); with the timer on time, no entry waits longer than an
        /// interval.
        @Test func everyEntryIsPostedOnceAndTheRateIsBounded() async {
            await propertyCheck(count: 100, input: Gen.int(in: 0...(160 * 8 - 1)).array(of: 0...200)) { codes in
                let interval = 100
                let burst = 3
                var batcher = TestBatcher(interval: .milliseconds(interval), burst: burst)
                let keys = [
                    TestBatcher.Key(watch: Self.errors, app: Self.monitor), TestBatcher.Key(watch: Self.errors, app: Self.pager),
                    TestBatcher.Key(watch: Self.audit, app: Self.monitor), TestBatcher.Key(watch: Self.audit, app: Self.pager),
                ]
                func isQueue(_ key: TestBatcher.Key) -> Bool { key.watch == Self.audit }
                var now = 0
                var added: [TestBatcher.Key: [(n: Int, at: Int)]] = [:]
                var posts: [TestBatcher.Key: [(batch: TestBatcher.Batch, at: Int)]] = [:]
                var timely = true
                func record(_ batches: [TestBatcher.Batch], at time: Int) {
                    for batch in batches { posts[batch.key, default: []].append((batch, time)) }
                }
                // The timer fires when the next window ends, or (once late) at the latest time the batcher was given.
                func dueUntil(_ time: Int) {
                    while let due = batcher.nextDue, due <= Self.at(time) {
                        let at = max(Int(due.offset / .milliseconds(1)), now)
                        record(batcher.due(at: Self.at(at)), at: at)
                    }
                }
                for (index, code) in codes.enumerated() {
                    let gap = code / 8
                    let key = keys[(code / 2) % 4]
                    let late = code % 2 == 1
                    if late { timely = false } else { dueUntil(now + gap) }
                    now += gap
                    let n = index + 1
                    added[key, default: []].append((n, now))
                    record(batcher.add(key, n, cursor: Self.cursor(n), queue: isQueue(key), at: Self.at(now)), at: now)
                }
                dueUntil(now + 10 * interval)
                #expect(batcher.nextDue == nil && keys.allSatisfy { !batcher.hasPending($0.watch) }, "nothing left waiting")
                let steps = "codes \(codes)"
                for key in keys {
                    let entries = added[key] ?? []
                    let posted = posts[key] ?? []
                    #expect(posted.reduce(0) { $0 + $1.batch.entries } == entries.count, "every entry counted once: \(steps)")
                    // Each batch stands for the entries since the last one before it, ending with its last.
                    var taken = 0
                    for (batch, at) in posted {
                        let upTo = entries.firstIndex { $0.n == batch.last }.map { $0 + 1 } ?? -1
                        #expect(upTo - taken == batch.entries, "batch of \(batch.entries) ending at \(batch.last): \(steps)")
                        if timely, upTo > taken {
                            #expect(at - entries[taken].at <= interval, "entry \(entries[taken].n) waited from \(entries[taken].at) to \(at): \(steps)")
                        }
                        #expect(at >= (upTo > 0 ? entries[upTo - 1].at : 0), "not posted before its last entry came")
                        taken = max(taken, upTo)
                    }
                    let times = posted.map(\.at)
                    let allowance = isQueue(key) ? burst : 1
                    for (index, start) in times.enumerated() {
                        let inOne = times[index...].prefix { $0 < start + interval }.count
                        #expect(inOne <= 2 * allowance - 1, "\(inOne) posts in [\(start), \(start + interval)): \(steps)")
                        let inFive = times[index...].prefix { $0 < start + 5 * interval }.count
                        #expect(inFive <= 6 * allowance - 1, "\(inFive) posts in five intervals from \(start): \(steps)")
                    }
                }
            }
        }
    }
}
