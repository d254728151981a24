import CoalesceCore
import Testing

/// A launch's callbacks and reasons, the restore reason taken from how the last process ended, and crash-loop
/// protection: launches that end before the app finishes launching, counted in a row, hold the daemon's own launches
/// back once they reach the limit.
@Suite struct LaunchTests {
    let t0 = TestInstant.zero

    func at(_ seconds: Double) -> TestInstant { self.t0.advanced(by: .milliseconds(Int64(seconds * 1000))) }

    @Test func aLaunchSaysWillFinishLaunchingThenDidFinishLaunchingAndFinishesWhenThatIsAcknowledged() throws {
        var app = Lifecycle()
        let effects = try app.launch(.foreground, now: self.t0)
        let callbacks = effects.compactMap { effect -> LifecycleCallback? in
            if case .deliver(let callback, _, _) = effect { return callback }
            return nil
        }
        #expect(callbacks == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(app.isFinishingLaunch)
        _ = app.acknowledge(upTo: 1, now: self.t0)
        #expect(app.isFinishingLaunch, "willFinishLaunching acknowledged is not the launch finished")
        _ = app.acknowledge(upTo: 2, now: self.t0)
        #expect(!app.isFinishingLaunch)
    }

    /// The restore reason: nothing saved is pristine whatever happened; otherwise the way the last process ended.
    @Test(arguments: [
        (TransitionReason?.none, true, LaunchRestoration.launch),
        (.terminate, true, .launch),
        (.processExited, true, .recover),
        (.launchNotAcknowledged, true, .recover),
        (.backgroundNotAcknowledged, true, .recover),
        (.notReattached, true, .recover),
        (.purge, true, .restore),
        (.exitsOnSuspend, true, .restore),
        (.backgroundTasksExpired, true, .restore),
        (.purge, false, .pristine),
        (.processExited, false, .pristine),
        (nil, false, .pristine),
    ])
    func theRestoreReasonFollowsHowTheLastProcessEnded(end: TransitionReason?, saved: Bool, expected: LaunchRestoration) {
        #expect(LaunchRestoration.after(end, hasSavedState: saved) == expected)
    }

    /// Three launches that die before didFinishLaunching is acknowledged hold launches back, told once; an
    /// operator's launch lets them go.
    @Test func launchesThatDieBeforeFinishingAreHeldBackAtTheLimit() throws {
        var app = Lifecycle()
        for round in 1...3 {
            _ = try app.launch(.background, now: self.at(Double(round)))
            let ended = app.processExited(now: self.at(Double(round)))
            #expect(app.failedLaunches.inARow == round)
            #expect(ended.contains(.launchesHeld(failedInARow: 3)) == (round == 3), "round \(round): \(ended)")
            #expect(app.launchesHeld == (round == 3))
        }
        _ = try app.launch(.background, now: self.at(4))
        #expect(app.processExited(now: self.at(4)).contains(.launchesHeld(failedInARow: 4)) == false, "told once")
        app.launchesAllowed()
        #expect(!app.launchesHeld && app.failedLaunches.inARow == 0)
    }

    @Test func aLaunchThatFinishesStartsTheCountAfresh() throws {
        var app = Lifecycle()
        _ = try app.launch(.foreground, now: self.t0)
        _ = app.processExited(now: self.t0)
        _ = try app.launch(.foreground, now: self.at(1))
        _ = app.processExited(now: self.at(1))
        #expect(app.failedLaunches.inARow == 2)
        let launched = try app.launch(.foreground, now: self.at(2))
        _ = app.acknowledge(upTo: launched.lastSequence!, now: self.at(2))
        #expect(app.failedLaunches.inARow == 0)
        _ = app.processExited(now: self.at(3))
        #expect(app.failedLaunches.inARow == 0, "an app that finished launching and later exits is no failed launch")
    }

    /// A launch killed for not acknowledging in time counts; a terminate while launching does not; a launch that
    /// never reached the app (no process attached) counts.
    @Test func whatCountsAsAFailedLaunch() throws {
        var app = Lifecycle()
        _ = try app.launch(.foreground, now: self.t0)
        _ = app.timePassed(now: self.at(6))
        #expect(app.state == .notRunning && app.failedLaunches.inARow == 1, "killed for didFinishLaunching")
        _ = try app.launch(.foreground, now: self.at(7))
        _ = try app.terminate(now: self.at(7))
        #expect(app.failedLaunches.inARow == 1, "an operator's Terminate is no failure")
        _ = app.launchFailed()
        #expect(app.failedLaunches.inARow == 2)
    }

    @Test func noLimitHoldsNothing() throws {
        var timings = LifecycleTimings()
        timings.failedLaunchLimit = nil
        var app = Lifecycle(timings: timings)
        for round in 1...10 {
            _ = try app.launch(.background, now: self.at(Double(round)))
            #expect(!app.processExited(now: self.at(Double(round))).contains { if case .launchesHeld = $0 { true } else { false } })
        }
        #expect(!app.launchesHeld)
    }
}

/// Which app opens a URL: schemes and MIME types, a desktop file's list, and the one choice.
@Suite struct URLHandlersTests {
    @Test(arguments: [
        ("mailto:someone@example.org", "mailto"), ("HTTPS://example.org", "https"), ("x-app+v1.2:open", "x-app+v1.2"),
        ("file:///tmp/a.ics", "file"),
    ])
    func aURLsSchemeIsWhatComesBeforeItsFirstColon(url: String, scheme: String) {
        #expect(URLHandlers.scheme(of: url) == scheme)
    }

    @Test(arguments: ["no-colon", ":empty", "1abc:x", "a b:c", "/tmp/a.ics", "ma_il:x"])
    func textWithoutASchemeHasNone(url: String) {
        #expect(URLHandlers.scheme(of: url) == nil)
    }

    @Test func declaredNamesAreChecked() {
        #expect(URLHandlers.problem(inScheme: "mailto") == nil)
        #expect(URLHandlers.problem(inScheme: "mailto:") != nil)
        #expect(URLHandlers.problem(inScheme: "") != nil)
        #expect(URLHandlers.problem(inMIMEType: "text/calendar", wildcard: false) == nil)
        #expect(URLHandlers.problem(inMIMEType: "image/*", wildcard: true) == nil)
        #expect(URLHandlers.problem(inMIMEType: "image/*", wildcard: false) != nil)
        #expect(URLHandlers.problem(inMIMEType: "text", wildcard: true) != nil)
        #expect(URLHandlers.problem(inMIMEType: "text/cal endar", wildcard: true) != nil)
    }

    @Test func aDesktopFilesMimeTypeListGivesSchemesAndTypes() {
        let text = """
            [Desktop Entry]
            Name=Mail
            MimeType=x-scheme-handler/mailto;message/rfc822; image/*;not a type;

            [Desktop Action compose]
            MimeType=x-scheme-handler/other;
            """
        let list = URLHandlers.desktopMIMETypes(text)
        #expect(list == "x-scheme-handler/mailto;message/rfc822; image/*;not a type;")
        let opens = URLHandlers.Opens(desktopMIMETypes: list ?? "")
        #expect(opens.schemes == ["mailto"])
        #expect(opens.types == ["message/rfc822", "image/*"])
        #expect(URLHandlers.desktopMIMETypes("[Desktop Action x]\nMimeType=a/b") == nil, "only the entry's own group")
    }

    @Test func theOneThatOpensItIsChosenAndSeveralAreNotGuessedBetween() {
        let mail = URLHandlers.Opens(schemes: ["mailto"], types: ["message/rfc822"])
        let viewer = URLHandlers.Opens(types: ["image/*"])
        let other = URLHandlers.Opens(schemes: ["MailTo"])
        let mailto = URLHandlers.Target(scheme: "mailto")
        #expect(URLHandlers.choose(mailto, among: ["mail": mail, "viewer": viewer], named: nil) == .app("mail"))
        #expect(URLHandlers.choose(mailto, among: ["mail": mail, "other": other], named: nil) == .several(["mail", "other"]))
        #expect(URLHandlers.choose(mailto, among: ["mail": mail, "other": other], named: "other") == .app("other"))
        #expect(URLHandlers.choose(mailto, among: ["mail": mail, "viewer": viewer], named: "viewer") == .none(named: "viewer"))
        #expect(URLHandlers.choose(URLHandlers.Target(scheme: "https"), among: ["mail": mail], named: nil) == .none(named: nil))
        let png = URLHandlers.Target(scheme: "file", type: "image/png")
        #expect(URLHandlers.choose(png, among: ["mail": mail, "viewer": viewer], named: nil) == .app("viewer"), "image/* takes image/png")
        let eml = URLHandlers.Target(scheme: "file", type: "message/rfc822")
        #expect(URLHandlers.choose(eml, among: ["mail": mail, "viewer": viewer], named: nil) == .app("mail"))
    }
}
