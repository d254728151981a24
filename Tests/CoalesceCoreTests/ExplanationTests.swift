import CoalesceCore
import Testing

/// What `coalescectl explain` says, decided from the lifecycle and the shell's facts: each state's reasons, in the
/// order they matter.
@Suite struct ExplanationTests {
    let t0 = TestInstant.zero

    func at(_ seconds: Double) -> TestInstant { self.t0.advanced(by: .milliseconds(Int64(seconds * 1000))) }

    func codes(_ app: Lifecycle, _ facts: AppExplanation.Facts = AppExplanation.Facts(), at seconds: Double) -> [String] {
        app.explanation(facts, now: self.at(seconds)).reasons.map(\.code)
    }

    @Test func aStoppedAppSaysWhatLaunchesIt() {
        var facts = AppExplanation.Facts()
        #expect(Lifecycle().explanation(facts, now: self.t0).reasons == [.notRunning(launchedBy: [])])
        facts.launchingKinds = ["voip.call"]
        let reason = Lifecycle().explanation(facts, now: self.t0).reasons[0]
        #expect(reason.text.contains("a post of voip.call launches it into the background"))
    }

    @Test func anAppInTheForegroundSaysWhatKeepsItThere() throws {
        var app = Lifecycle()
        _ = try app.launch(.foreground, now: self.t0)
        #expect(self.codes(app, at: 1) == ["foreground"])
        var facts = AppExplanation.Facts()
        facts.focusedScenes = 1
        facts.shownScenes = 1
        #expect(app.explanation(facts, now: self.at(1)).reasons == [.onScreen(focused: 1, shown: 1)])
        _ = try app.interruptionBegan(now: self.at(2))
        facts.interruptions = ["lock"]
        #expect(self.codes(app, facts, at: 3) == ["onScreen", "interrupted"])
        #expect(app.explanation(facts, now: self.at(3)).reasons[1].text == "It is interrupted (lock): it is active again when that ends.")
    }

    @Test func anAppInTheBackgroundSaysWhatItWaitsFor() throws {
        var app = Lifecycle()
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        _ = try app.beginBackgroundTask(name: "upload", now: self.t0)
        _ = try app.deactivate(now: self.at(10))
        let reasons = app.explanation(AppExplanation.Facts(), now: self.at(12)).reasons
        #expect(reasons == [.didEnterBackgroundUnacknowledged(left: .seconds(3)), .tasksOpen(["upload"], left: .seconds(28))])
        #expect(reasons[1].text == "Background tasks are open (upload): it is suspended when they end or its background time runs out in 28 s.")
    }

    @Test func aSuspendedAppSaysHowItIsHeldWhatItHoldsAndWhatWakesIt() throws {
        var app = Lifecycle()
        let launched = try app.launch(.foreground, now: self.t0)
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.t0)
        let home = try app.deactivate(now: self.at(1))
        _ = app.acknowledge(upTo: home.lastSequence!, now: self.at(1))
        var facts = AppExplanation.Facts()
        facts.hold = .stopped
        #expect(app.explanation(facts, now: self.at(2)).reasons == [.suspended(.stopped), .wakesOn([])])
        facts.held = [AppExplanation.HeldKind(kind: "mail.subject", posts: 2), AppExplanation.HeldKind(kind: "mail.unread", posts: 1)]
        facts.wakingKinds = ["mail.unread"]
        let reasons = app.explanation(facts, now: self.at(2)).reasons
        #expect(reasons == [.suspended(.stopped), .holds(posts: 3, kinds: ["mail.subject", "mail.unread"]), .wakesOn(["mail.unread"])])
        #expect(reasons.map(\.text) == [
            "It is suspended and stopped (SIGSTOP): it runs no code.",
            "It holds 3 posts of mail.subject or mail.unread, delivered coalesced when it runs again.",
            "A post of mail.unread wakes it into the background; otherwise it runs again when it is activated.",
        ])

        // Woken for them: what it has still to acknowledge, and the time it has.
        _ = try app.wakeIntoBackground(now: self.at(5))
        _ = app.reserveSequence()
        let second = app.reserveSequence()
        #expect(app.explanation(facts, now: self.at(6)).reasons == [.woken(unacknowledged: 2, left: .seconds(29))])
        _ = app.reserveSequence()
        _ = app.acknowledge(upTo: second, now: self.at(7))
        #expect(app.explanation(facts, now: self.at(15)).reasons == [.woken(unacknowledged: 1, left: .seconds(20))])
    }
}
