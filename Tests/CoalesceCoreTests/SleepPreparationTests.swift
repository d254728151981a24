import CoalesceCore
import Testing

/// Preparing for the system's sleep: the core machine alone on a test clock, each case a script of inputs (a marble
/// line) and, for each input, what the machine decided, as the shell would carry it out.
///
/// A script's words, in order, one input each unless said:
/// - `+2s`, `+750ms`: the clock moves on (no input);
/// - `start`: the daemon follows sleep; `back`: logind came back (cause "logind started");
/// - `granted:N`: logind granted inhibitor N; `stop`;
/// - `sleep`, `wake`: PrepareForSleep(true), PrepareForSleep(false);
/// - `told:a=3,b=5~`: apps a and b told, a to acknowledge up to 3, b up to 5 and not attached (`told:` for none);
/// - `ack:a=3`: a acknowledged up to 3; `timeout:a`: a's wait ended without it (its time ran out at the deadline, or its process went);
/// - `flushed`: the store is on disk; `preparing:no` (`yes`, `unknown`): logind's answer.
@Suite struct SleepPreparationTests {
    typealias Machine = SleepPreparation<TestInstant, Int>

    static func app(_ letter: Substring) -> AppName {
        try! AppName("org.example.\(letter)")
    }

    static func short(_ app: AppName) -> String {
        String(app.value.split(separator: ".").last ?? "")
    }

    static func time(_ instant: TestInstant) -> String {
        Self.span(instant.offset)
    }

    static func span(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }

    /// What the actions say, one phrase each, as a table row reads.
    static func said(_ actions: [Machine.Action]) -> String {
        let phrases = actions.map { action -> String in
            switch action {
            case .takeInhibitor(let cause): "take" + (cause.map { " (\($0))" } ?? "")
            case .inhibitorHeld(let cause): "held" + (cause.map { " (\($0))" } ?? "")
            case .releaseInhibitor(let inhibitor): "release \(inhibitor)"
            case .interruptApps: "interrupt"
            case .waitForAcknowledgements(let waits, let deadline):
                "wait \(waits.map { "\(Self.short($0.app))=\($0.sequence)" }.joined(separator: " "))"
                    + " until \(Self.time(deadline))"
            case .flushStore: "flush"
            case .wentToSleep(let report):
                "slept told=\(report.told.map(Self.short).joined(separator: ","))"
                    + " late=\(report.late.map(Self.short).joined(separator: ","))"
                    + " budget=\(Self.span(report.budget)) took=\(Self.span(report.elapsed))"
            case .wakeApps(let apps): "wake \(apps.map(Self.short).joined(separator: ","))"
            case .askPreparingForSleep(let cause): "ask preparing (\(cause))"
            case .catchUpWake(let cause): "lost wake (\(cause))"
            }
        }
        return phrases.isEmpty ? "-" : phrases.joined(separator: "; ")
    }

    /// Plays `script` on `machine` from time zero; returns one row per input: `input → what it decided`.
    static func play(_ script: String, on machine: inout Machine) -> [String] {
        var now = TestInstant.zero
        var rows: [String] = []
        for word in script.split(separator: " ") {
            if word.hasPrefix("+") {
                let amount = word.dropFirst()
                let step: Duration =
                    amount.hasSuffix("ms") ? .milliseconds(Int(amount.dropLast(2))!) : .seconds(Int(amount.dropLast())!)
                now = now.advanced(by: step)
                continue
            }
            let parts = word.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let argument = parts.count > 1 ? parts[1] : ""
            let actions: [Machine.Action]
            switch parts[0] {
            case "start": actions = machine.start()
            case "back": actions = machine.start(cause: "logind started")
            case "granted": actions = machine.inhibitorTaken(Int(argument)!, cause: nil)
            case "stop": actions = machine.stop()
            case "sleep": actions = machine.sleepAnnounced(now: now)
            case "wake": actions = machine.wakeAnnounced(now: now)
            case "told":
                let told = argument.split(separator: ",").map { entry in
                    let pair = entry.split(separator: "=")
                    return SleepInterruption(
                        app: Self.app(pair[0]),
                        sequence: UInt64(pair[1].prefix { $0 != "~" })!,
                        attached: !pair[1].hasSuffix("~")
                    )
                }
                actions = machine.told(told, now: now)
            case "ack":
                let pair = argument.split(separator: "=")
                actions = machine.acknowledged(Self.app(pair[0]), upTo: UInt64(pair[1])!)
            case "timeout": actions = machine.notAcknowledged(Self.app(argument))
            case "flushed": actions = machine.flushed(now: now)
            case "preparing":
                let answer: Bool? = argument == "yes" ? true : argument == "no" ? false : nil
                actions = machine.preparingForSleep(answer, cause: "logind started")
            default: preconditionFailure("no such input: \(word)")
            }
            rows.append("\(word) → \(Self.said(actions))")
        }
        return rows
    }

    static func play(_ script: String, delay: Duration = .seconds(5)) -> [String] {
        var machine = Machine(delay: delay)
        return Self.play(script, on: &machine)
    }

    @Test func whoASleepInterruptsIsTheActiveAppsByName() {
        let onScreen: [AppName: AppState] = [
            Self.app("mail"): .active, Self.app("call"): .inactive,
            Self.app("books"): .active, Self.app("maps"): .background,
        ]
        let chosen = SleepInterruption.appsToInterrupt(onScreen).map(Self.short)
        #expect(chosen == ["books", "mail"])
        #expect(SleepInterruption.appsToInterrupt([:]).isEmpty)
    }

    @Test func theAppsHaveThreeQuartersOfTheDelayAndTheStoreIsFlushedBeforeTheInhibitorIsLetGo() {
        let rows = Self.play(
            "start granted:7 sleep told:a=3,b=5 +1s ack:a=3 +500ms ack:b=5 +250ms flushed +10s wake granted:8"
        )
        #expect(rows == [
            "start → take",
            "granted:7 → held",
            "sleep → interrupt",
            "told:a=3,b=5 → wait a=3 b=5 until 3750ms",
            "ack:a=3 → -",
            "ack:b=5 → flush",
            "flushed → release 7; slept told=a,b late= budget=3750ms took=1750ms",
            "wake → take; wake a,b",
            "granted:8 → held",
        ])
    }

    @Test(arguments: [
        (Duration.seconds(2), "1500ms", "2500ms"),
        (Duration.seconds(5), "3750ms", "4750ms"),
        (Duration.seconds(30), "22500ms", "23500ms"),
        (Duration.milliseconds(100), "75ms", "1075ms"),
    ])
    func theWaitIsThreeQuartersOfLogindsDelay(delay: Duration, budget: String, deadline: String) {
        // Told one second in: the deadline is the budget after that.
        let rows = Self.play("+1s sleep told:a=1", delay: delay)
        #expect(rows.last == "told:a=1 → wait a=1 until \(deadline)")
        #expect(Self.span(Machine.budget(for: delay)) == budget)
    }

    @Test func anAppThatNeverAcknowledgesDoesNotHoldSleepBackAndIsNamedLate() {
        // Its wait ends at the deadline without it: the sleep goes ahead.
        let timedOut = Self.play("granted:1 sleep told:a=3,b=4 +1s ack:b=4 +2750ms timeout:a flushed")
        #expect(timedOut.suffix(3) == [
            "ack:b=4 → -",
            "timeout:a → flush",
            "flushed → release 1; slept told=a,b late=a budget=3750ms took=3750ms",
        ])
        // Or both waits end at the deadline: both are late, named in order.
        let both = Self.play("granted:1 sleep told:b=4,a=3 +3750ms timeout:b timeout:a flushed")
        #expect(both.suffix(3) == [
            "timeout:b → -",
            "timeout:a → flush",
            "flushed → release 1; slept told=b,a late=a,b budget=3750ms took=3750ms",
        ])
    }

    @Test func anAcknowledgementAfterTheBudgetChangesNothing() {
        let rows = Self.play("granted:1 sleep told:a=3 +4s timeout:a ack:a=3 flushed ack:a=3")
        #expect(rows.suffix(4) == [
            "timeout:a → flush",
            "ack:a=3 → -",
            "flushed → release 1; slept told=a late=a budget=3750ms took=4s",
            "ack:a=3 → -",
        ])
    }

    @Test func onlyAnAcknowledgementOfTheNumberToldCounts() {
        let rows = Self.play("granted:1 sleep told:a=9 ack:a=8 ack:c=9 ack:a=10")
        #expect(rows.suffix(3) == ["ack:a=8 → -", "ack:c=9 → -", "ack:a=10 → flush"])
    }

    @Test func nobodyToldOrNobodyAttachedMeansNoWaitAndAFlushAtOnce() {
        let none = Self.play("granted:1 sleep told: +20ms flushed")
        #expect(none.suffix(2) == [
            "told: → flush",
            "flushed → release 1; slept told= late= budget=3750ms took=20ms",
        ])
        // Told but not attached (taken up after a restart): not waited for, not late, and woken with the others.
        let detached = Self.play("granted:1 sleep told:a=2~,b=3 ack:b=3 flushed wake")
        #expect(detached.suffix(4) == [
            "told:a=2~,b=3 → wait b=3 until 3750ms",
            "ack:b=3 → flush",
            "flushed → release 1; slept told=a,b late= budget=3750ms took=0s",
            "wake → take; wake a,b",
        ])
    }

    @Test func theInhibitorIsAskedForOnlyWhileNoneIsHeldAndTheSystemIsAwake() {
        // Two askings answered: the second inhibitor is let go at once.
        #expect(Self.play("start back granted:1 granted:2") == [
            "start → take",
            "back → take (logind started)",
            "granted:1 → held",
            "granted:2 → release 2",
        ])
        // Held: logind coming back asks for nothing.
        #expect(Self.play("start granted:1 back").last == "back → -")
        // Granted after a sleep began: let go, since logind would not delay that sleep again.
        #expect(Self.play("start sleep granted:1").last == "granted:1 → release 1")
        // Stopping lets go of the one held, once.
        #expect(Self.play("start granted:4 stop stop").suffix(2) == ["stop → release 4", "stop → -"])
    }

    @Test func withoutAnInhibitorTheAppsAreStillToldAndNothingIsLetGo() {
        // Inhibit failed (no logind yet): the sleep is followed as it happens.
        let rows = Self.play("start sleep told:a=3 ack:a=3 flushed wake granted:2")
        #expect(rows == [
            "start → take",
            "sleep → interrupt",
            "told:a=3 → wait a=3 until 3750ms",
            "ack:a=3 → flush",
            "flushed → slept told=a late= budget=3750ms took=0s",
            "wake → take; wake a",
            "granted:2 → held",
        ])
    }

    @Test func aSecondSleepWithoutAWakeIsPreparedAgainAndItsWakeWakesTheAppsOfBoth() {
        // The first wake's signal was lost: no inhibitor was taken again, so none is let go the second time.
        let rows = Self.play("granted:1 sleep told:a=3 ack:a=3 flushed sleep told:b=6 ack:b=6 flushed wake")
        #expect(rows.suffix(5) == [
            "sleep → interrupt",
            "told:b=6 → wait b=6 until 3750ms",
            "ack:b=6 → flush",
            "flushed → slept told=b late= budget=3750ms took=0s",
            "wake → take; wake a,b",
        ])
    }

    @Test func logindComingBackWhileAsleepCatchesUpWithALostWake() {
        var machine = Machine(delay: .seconds(5))
        let asleep = Self.play("granted:1 sleep told:a=3 ack:a=3 flushed", on: &machine)
        #expect(asleep.last == "flushed → release 1; slept told=a late= budget=3750ms took=0s")
        // Still preparing, or logind could not be asked: the system is taken to be asleep.
        let rows = Self.play("back preparing:yes back preparing:unknown back preparing:no wake granted:2", on: &machine)
        #expect(rows == [
            "back → ask preparing (logind started)",
            "preparing:yes → -",
            "back → ask preparing (logind started)",
            "preparing:unknown → -",
            "back → ask preparing (logind started)",
            "preparing:no → lost wake (logind started)",
            "wake → take; wake a",
            "granted:2 → held",
        ])
        // Awake, an answer that comes late catches up with nothing.
        #expect(Self.play("preparing:no", on: &machine) == ["preparing:no → -"])
    }

    @Test func aWakeAnnouncedWhileTheAppsAreWaitedForComesAfterTheFlush() {
        let rows = Self.play("granted:1 sleep told:a=3 wake +1s ack:a=3 flushed")
        #expect(rows.suffix(3) == [
            "wake → -",
            "ack:a=3 → flush",
            "flushed → release 1; slept told=a late= budget=3750ms took=1s; take; wake a",
        ])
    }

    @Test func aSleepAnnouncedTwiceWhilePreparingTellsNoOneTwice() {
        let rows = Self.play("granted:1 sleep told:a=3 sleep told:b=4 ack:a=3 flushed")
        #expect(rows.suffix(5) == [
            "told:a=3 → wait a=3 until 3750ms",
            "sleep → -",
            "told:b=4 → -",
            "ack:a=3 → flush",
            "flushed → release 1; slept told=a late= budget=3750ms took=0s",
        ])
    }

    @Test func aFlushBeforeTheWaitsEndOrTwiceDoesNothing() {
        let rows = Self.play("granted:1 sleep flushed told:a=3 flushed ack:a=3 flushed flushed")
        #expect(rows.suffix(6) == [
            "flushed → -",
            "told:a=3 → wait a=3 until 3750ms",
            "flushed → -",
            "ack:a=3 → flush",
            "flushed → release 1; slept told=a late= budget=3750ms took=0s",
            "flushed → -",
        ])
    }
}
