import CoalesceCore
import Testing

// Changes of watches and read errors: what each app receives when the watches change, or the journal fails to read,
// while entries are read, folding or in flight.
extension WatchPositionsTests {
    @Test func aWatchAddedMidStreamStartsAtTheTailAndTheOthersGoOn() {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        rig.answer()

        rig.definitions.append(Self.watch(Self.audit))
        rig.recipients[Self.audit] = [Self.pager]
        rig.matches[Self.audit] = { _ in true }
        rig.starts = [:]
        rig.follow()
        #expect(rig.own[Self.audit] == 3, "a new watch's start is its position at once")
        #expect(rig.seeks.last == "after 3", "the errors watch has read up to the reader")
        rig.write(4...5)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
        #expect(rig.received["audit→pager"] == ["1×4", "1×5"])
    }

    @Test func aWatchAddedFromAnEarlierEntryTakesTheReaderBackAndTheOthersSkipWhatTheyRead() {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...5)
        rig.pass()
        rig.answer()

        rig.definitions.append(Self.watch(Self.audit))
        rig.recipients[Self.audit] = [Self.pager]
        rig.matches[Self.audit] = { _ in true }
        rig.starts = [Self.audit: .cursor(Self.cursor(2).text)]
        rig.follow()
        #expect(rig.seeks.last == "after 2")
        rig.write(6...6)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5", "1×6"], "3 to 5 skipped")
        #expect(rig.received["audit→pager"] == ["1×3", "1×4", "1×5", "1×6"])
    }

    @Test func aChangedWatchGoesOnFromItsStoredPositions() {
        var rig = Rig([Self.errors, Self.audit])
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        rig.answer()
        // 4 and 5 are written before the reader comes to them; then errors changes its kind, audit is removed.
        rig.write(4...5)
        rig.definitions = [Self.watch(Self.errors, kind: "log.other")]
        rig.follow()
        #expect(rig.seeks.last == "after 3", "the changed watch from its app's position")
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
        #expect(rig.received["audit→monitor"] == ["1×1", "1×2", "1×3"])
    }

    @Test func aRemovedWatchPostsNothingOfWhatWasFolding() {
        var rig = Rig([Self.errors, Self.audit], interval: .seconds(10))
        rig.matches[Self.errors] = { $0 == 1 }
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        rig.answer()
        rig.definitions = [Self.watch(Self.errors)]
        rig.follow()
        rig.tick(to: 10_000)
        rig.answer()
        #expect(rig.machine.nextDue == nil)
        #expect(rig.received["errors→monitor"] == ["1×1"])
        #expect(rig.received["audit→monitor"] == ["1×1"], "2 and 3 were folding when it was removed")
    }

    @Test func aReadErrorSeeksBackToWhatEveryWatchHasRead() {
        var rig = Rig([Self.errors, Self.audit])
        rig.starts = [Self.errors: .head]
        rig.write(1...4)
        rig.follow()
        rig.pass()
        rig.answer()
        // The audit watch started at the tail (4); the errors watch has read all.
        rig.carryOut(rig.machine.readFailed())
        #expect(rig.seeks == ["head", "after 4"])
        rig.write(5...5)
        rig.read = []
        rig.pass()
        rig.answer()
        #expect(rig.read == [5])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
        #expect(rig.received["audit→monitor"] == ["1×5"])
    }

    // MARK: A change while entries are in flight or folding

    /// How the errors watch changes while a post of it is in flight.
    enum Change: String, CaseIterable, Sendable {
        case redefined
        case removedAndAddedAgain
    }

    @Test(arguments: Change.allCases)
    func aPostInFlightAcrossAChangeStillHoldsBackTheRewindAndThePositionOfItsWatch(_ change: Change) {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...2)
        rig.pass()
        rig.answer()
        rig.tick(to: 1000)
        rig.write(3...3)
        rig.pass()
        // The watch comes back matching other entries than 3, whose post is in flight.
        rig.matches[Self.errors] = { $0 != 3 }
        switch change {
        case .redefined:
            rig.definitions = [Self.watch(Self.errors, kind: "log.other")]
        case .removedAndAddedAgain:
            rig.definitions = []
            rig.follow()
            rig.definitions = [Self.watch(Self.errors)]
        }
        rig.follow()
        rig.answer()
        rig.write(4...4)
        rig.pass()
        rig.answer(failing: true)
        #expect(rig.rewinds == 1, "4's write failed and nothing is in flight")
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4"])
        rig.tick(to: 2000)
        #expect(rig.own[Self.errors] == 4, "nothing in flight: the watch writes its position")
    }

    @Test(arguments: [false, true])
    func aRedefinedWatchSkipsWhatItsOldDefinitionHasInFlightUnlessItsWriteFails(_ fails: Bool) {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...2)
        rig.pass()
        rig.answer()
        rig.tick(to: 1000)
        rig.write(3...4)
        rig.pass()
        rig.definitions = [Self.watch(Self.errors, kind: "log.other")]
        rig.follow()
        #expect(rig.seeks.last == "after 2", "its own position on disk")
        rig.pass()
        #expect(rig.read.suffix(2) == [3, 4], "read again for the new definition")
        rig.answer { $0.last == 3 }
        rig.answer(failing: fails)
        #expect(rig.rewinds == (fails ? 1 : 0))
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4"], "3 and 4 posted once")
    }

    @Test func aRedefinedWatchFoldsWhatItReadsAgainWithoutWhatItsOldDefinitionWasFolding() {
        var rig = Rig([Self.errors], interval: .seconds(10))
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...3)
        rig.pass()
        rig.answer()
        #expect(rig.received["errors→monitor"] == ["1×1"], "2 and 3 fold until the window ends")
        rig.definitions = [Self.watch(Self.errors, kind: "log.other")]
        rig.follow()
        rig.pass()
        rig.answer()
        rig.tick(to: 10_000)
        rig.answer()
        #expect(rig.read == [1, 2, 3, 2, 3], "2 and 3 read again for the new definition")
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3"], "2 and 3 once each, in the new one's window")
    }

    @Test func aReadErrorMidPassPostsWhatThePassHadPostedOnce() {
        var rig = Rig([Self.errors, Self.audit])
        rig.matches[Self.audit] = { $0 == 6 }
        rig.starts = [Self.errors: .head, Self.audit: .head]
        rig.follow()
        rig.write(1...2)
        rig.pass()
        rig.answer()
        rig.write(3...6)
        // 3 and 4 are read and posted; reading 5 fails.
        rig.pass(failingAfter: 2)
        #expect(rig.seeks.last == "after 2", "the audit watch has read up to 4 only in a pass that ended nowhere")
        rig.pass()
        rig.answer()
        #expect(rig.read == [1, 2, 3, 4, 3, 4, 5, 6])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5", "1×6"])
        #expect(rig.received["audit→monitor"] == ["1×6"])
    }

    /// The errors watch has read 1 to 5; the audit watch is added from the head.
    static func auditAddedFromTheHead() -> Rig {
        var rig = Rig([Self.errors])
        rig.starts = [Self.errors: .head]
        rig.follow()
        rig.write(1...5)
        rig.pass()
        rig.answer()
        rig.definitions.append(Self.watch(Self.audit))
        rig.recipients[Self.audit] = [Self.pager]
        rig.matches[Self.audit] = { _ in true }
        rig.starts = [Self.audit: .head]
        rig.follow()
        return rig
    }

    @Test func aReadErrorRightAfterAWatchTookTheReaderBackLosesNothingOfIt() {
        var rig = Self.auditAddedFromTheHead()
        // The audit watch reads 1 and 2; reading 3 fails, before the reader is back where it was.
        rig.pass(failingAfter: 2)
        #expect(rig.seeks == ["head", "head", "after 2"])
        rig.pass()
        rig.answer()
        #expect(rig.received["audit→pager"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
    }

    @Test func aWatchThatHasReadNothingYetWritesNoPositionOfItsOwn() {
        var rig = Self.auditAddedFromTheHead()
        // Reading 1 fails; a second later the daemon is killed.
        rig.pass(failingAfter: 0)
        rig.tick(to: 1000)
        rig.restart()
        rig.pass()
        rig.answer()
        #expect(rig.received["audit→pager"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
        #expect(rig.received["errors→monitor"] == ["1×1", "1×2", "1×3", "1×4", "1×5"])
    }
}
