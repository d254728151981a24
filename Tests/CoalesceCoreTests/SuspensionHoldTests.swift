import CoalesceCore
import Testing

/// When a suspended app's process is stopped, frozen, continued and thawed, and what falls back to what: the core
/// machine alone, each input with what it decides, as the shell would carry it out.
@Suite struct SuspensionHoldTests {
    final class Process: Equatable, CustomStringConvertible {
        let description: String
        init(_ name: String) { self.description = name }
        static func == (lhs: Process, rhs: Process) -> Bool { lhs === rhs }
    }

    typealias Hold = SuspensionHold<Process>

    let app = Process("app")
    let unit = "app.service"

    /// The app in `state`, attached, having been sent numbers up to `lastSent` (this run's first is 1).
    func situation(
        _ state: AppState,
        mode: SuspensionMode = .stop,
        lastSent: UInt64 = 3,
        attached: Process? = nil,
        killing: [Process] = []
    ) -> Hold.Situation {
        let process = attached ?? self.app
        return Hold.Situation(
            state: state, mode: mode, process: process, attached: process, lastSent: lastSent, firstSequence: 1,
            killing: killing
        )
    }

    /// What the actions say, one word each, as a table row reads.
    func said(_ actions: [Hold.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .armDelay: "armDelay"
            case .cancelDelay: "cancelDelay"
            case .stop(let process, .mode): "stop \(process)"
            case .stop(let process, .notInUnit(let unit)): "stop \(process) (not in \(unit))"
            case .stop(let process, .notFrozen(let unit, let reason)): "stop \(process) (\(unit) not frozen: \(reason))"
            case .continue(let process): "continue \(process)"
            case .freeze(let unit): "freeze \(unit)"
            case .thaw(let unit): "thaw \(unit)"
            case .retryLater: "retryLater"
            case .released: "released"
            case .frozen(let unit, _): "frozen \(unit)"
            case .thawed(let unit, _): "thawed \(unit)"
            case .cannotThaw(let unit, let reason): "cannotThaw \(unit): \(reason)"
            }
        }
    }

    /// Suspended with everything acknowledged: held once the delay passes.
    func heldStopped(_ hold: inout Hold) {
        hold.acknowledged = 3
        #expect(self.said(hold.settle(self.situation(.suspended))) == ["armDelay"])
        #expect(self.said(hold.delayEnded(self.situation(.suspended), launchUnit: nil, runsInUnit: false)) == ["stop app"])
    }

    @Test func aSuspendedAppIsStoppedAfterTheDelayAndContinuedWhenWoken() {
        var hold = Hold()
        self.heldStopped(&hold)
        #expect(hold.held?.how == .stopped)
        // Woken: continued, and nothing more is armed.
        #expect(self.said(hold.settle(self.situation(.background))) == ["continue app", "released"])
        #expect(hold.held == nil && !hold.delayArmed)
    }

    @Test func nothingIsHeldUntilTheAppAcknowledgedAllItWasSent() {
        var hold = Hold()
        // Its last callback (number 3) is not acknowledged: its reply must be read before it is stopped.
        hold.acknowledged = 2
        #expect(self.said(hold.settle(self.situation(.suspended))).isEmpty)
        hold.acknowledged = 3
        #expect(self.said(hold.settle(self.situation(.suspended))) == ["armDelay"])
        // Before its first Ack of this run, numbers of earlier runs count as acknowledged.
        var fresh = Hold()
        #expect(self.said(fresh.settle(self.situation(.suspended, lastSent: 0))) == ["armDelay"])
    }

    @Test func aWakeBeforeTheDelayEndsCancelsItAndHoldsNothing() {
        var hold = Hold()
        hold.acknowledged = 3
        _ = hold.settle(self.situation(.suspended))
        #expect(self.said(hold.settle(self.situation(.background))) == ["cancelDelay"])
        // A delay that fired all the same finds nothing to hold.
        #expect(self.said(hold.delayEnded(self.situation(.background), launchUnit: nil, runsInUnit: false)).isEmpty)
        #expect(hold.held == nil)
    }

    @Test func cooperativeAppsAreNeverHeld() {
        var hold = Hold()
        hold.acknowledged = 3
        #expect(self.said(hold.settle(self.situation(.suspended, mode: .cooperative))).isEmpty)
    }

    @Test func freezingRunsThroughSystemdOneCallAtATime() {
        var hold = Hold()
        hold.acknowledged = 3
        let suspended = self.situation(.suspended, mode: .freeze)
        #expect(self.said(hold.settle(suspended)) == ["armDelay"])
        #expect(self.said(hold.delayEnded(suspended, launchUnit: self.unit, runsInUnit: true)) == ["freeze app.service"])
        #expect(hold.unitCallPending && hold.held?.how == .frozen)
        #expect(self.said(hold.unitAnswered(freezing: true, unit: self.unit, .done(.milliseconds(3)), suspended)) == ["frozen app.service"])
        #expect(hold.frozenUnit == self.unit)
        // Woken: thawed (what is sent meanwhile waits in its socket).
        let woken = self.situation(.background, mode: .freeze)
        #expect(self.said(hold.settle(woken)) == ["released", "thaw app.service"])
        #expect(self.said(hold.unitAnswered(freezing: false, unit: self.unit, .done(.milliseconds(2)), woken)) == ["thawed app.service"])
        #expect(hold.frozenUnit == nil && !hold.unitCallPending)
    }

    @Test func aWakeWhileTheFreezeIsWithSystemdThawsOnceItIsAnswered() {
        var hold = Hold()
        hold.acknowledged = 3
        let suspended = self.situation(.suspended, mode: .freeze)
        _ = hold.settle(suspended)
        _ = hold.delayEnded(suspended, launchUnit: self.unit, runsInUnit: true)
        let woken = self.situation(.background, mode: .freeze)
        // The freeze is still with systemd: no second call now.
        #expect(self.said(hold.settle(woken)) == ["released"])
        #expect(
            self.said(hold.unitAnswered(freezing: true, unit: self.unit, .done(.milliseconds(3)), woken))
                == ["frozen app.service", "thaw app.service"]
        )
    }

    @Test func aFreezeThatCannotBeMadeFallsBackToSIGSTOP() {
        let suspended = self.situation(.suspended, mode: .freeze)
        let cases: [(answer: Hold.UnitAnswer, said: String)] = [
            (.refused("the watchdog"), "stop app (app.service not frozen: the watchdog)"),
            (.failed("bus gone"), "stop app (app.service not frozen: FreezeUnit failed: bus gone)"),
        ]
        for (answer, said) in cases {
            var hold = Hold()
            hold.acknowledged = 3
            _ = hold.settle(suspended)
            _ = hold.delayEnded(suspended, launchUnit: self.unit, runsInUnit: true)
            #expect(self.said(hold.unitAnswered(freezing: true, unit: self.unit, answer, suspended)) == [said])
            #expect(hold.held?.how == .stopped && hold.frozenUnit == nil)
        }
        // Not in its launch unit: stopped at once, systemd not asked.
        var hold = Hold()
        hold.acknowledged = 3
        _ = hold.settle(suspended)
        #expect(
            self.said(hold.delayEnded(suspended, launchUnit: self.unit, runsInUnit: false)) == ["stop app (not in app.service)"]
        )
        // Mode freeze without a launch unit: stopped.
        var noUnit = Hold()
        noUnit.acknowledged = 3
        _ = noUnit.settle(suspended)
        #expect(self.said(noUnit.delayEnded(suspended, launchUnit: nil, runsInUnit: false)) == ["stop app"])
    }

    @Test func aKilledProcessIsNotContinuedButItsFrozenUnitIsThawed() {
        var stopped = Hold()
        self.heldStopped(&stopped)
        #expect(self.said(stopped.settle(self.situation(.notRunning, killing: [self.app]))).isEmpty)

        var frozen = Hold()
        frozen.acknowledged = 3
        let suspended = self.situation(.suspended, mode: .freeze)
        _ = frozen.settle(suspended)
        _ = frozen.delayEnded(suspended, launchUnit: self.unit, runsInUnit: true)
        _ = frozen.unitAnswered(freezing: true, unit: self.unit, .done(.zero), suspended)
        let killed = self.situation(.notRunning, mode: .freeze, killing: [self.app])
        #expect(self.said(frozen.settle(killed)) == ["thaw app.service"])
    }

    @Test func aThawThatFailsIsAskedAgainAndSaidOnce() {
        var hold = Hold()
        hold.takeUp(held: nil, frozenUnit: self.unit)
        let running = self.situation(.background, mode: .freeze)
        #expect(self.said(hold.retry()) == ["thaw app.service"])
        #expect(
            self.said(hold.unitAnswered(freezing: false, unit: self.unit, .failed("busy"), running))
                == ["cannotThaw app.service: busy", "retryLater"]
        )
        #expect(self.said(hold.retry()) == ["thaw app.service"])
        #expect(self.said(hold.unitAnswered(freezing: false, unit: self.unit, .failed("busy"), running)) == ["retryLater"])
        #expect(hold.thawRetries == 2)
        #expect(self.said(hold.retry()) == ["thaw app.service"])
        #expect(self.said(hold.unitAnswered(freezing: false, unit: self.unit, .done(.zero), running)) == ["thawed app.service"])
        #expect(hold.thawRetries == 0 && hold.frozenUnit == nil)
        // Thawed by someone else meanwhile: nothing more to do.
        var other = Hold()
        other.takeUp(held: nil, frozenUnit: self.unit)
        _ = other.retry()
        #expect(self.said(other.unitAnswered(freezing: false, unit: self.unit, .thawedMeanwhile, running)).isEmpty)
        #expect(other.frozenUnit == nil)
    }

    @Test func aProcessReplacedWhileHeldIsContinuedAndTheNewOneHeldAfterTheDelay() {
        var hold = Hold()
        self.heldStopped(&hold)
        let replacement = Process("replacement")
        #expect(
            self.said(hold.settle(self.situation(.suspended, attached: replacement))) == ["continue app", "released", "armDelay"]
        )
    }

    @Test func aDelayThatEndsWhileAThawIsWithSystemdStartsAgain() {
        var hold = Hold()
        hold.takeUp(held: nil, frozenUnit: self.unit)
        _ = hold.retry()
        hold.acknowledged = 3
        let suspended = self.situation(.suspended, mode: .freeze)
        #expect(self.said(hold.settle(suspended)) == ["armDelay"])
        #expect(self.said(hold.delayEnded(suspended, launchUnit: self.unit, runsInUnit: true)) == ["armDelay"])
        #expect(hold.held == nil)
    }
}
