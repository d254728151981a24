import CoalesceCore
import Testing

/// The memory pressure policy on injected readings: when running apps are warned, when suspended apps are purged
/// and when purging stops.
@Suite struct MemoryPressureTests {
    typealias Policy = MemoryPressurePolicy<TestInstant>

    /// GLib's low-memory warning and critical levels (gio/gmemorymonitorpsi.c).
    static let warning = StallThreshold(.some, stall: .milliseconds(70), window: .seconds(2))
    static let critical = StallThreshold(.full, stall: .milliseconds(100), window: .seconds(2))

    /// The PSI file as a machine under pressure writes it, its totals growing as the test says.
    struct Machine {
        var some: UInt64 = 1_000_000
        var full: UInt64 = 500_000
        var now = TestInstant.zero

        /// Time passes with this much stall (`some` and `full` in microseconds).
        mutating func pass(_ duration: Duration, some: UInt64 = 0, full: UInt64 = 0) -> PressureReading {
            self.now = self.now.advanced(by: duration)
            self.some += some
            self.full += full
            return PressureReading(some: .init(total: self.some), full: .init(total: self.full))
        }
    }

    @Test func readsThePressureFile() throws {
        let text = """
            some avg10=3.47 avg60=0.67 avg300=0.14 total=508426
            full avg10=3.32 avg60=0.64 avg300=0.13 total=490987

            """
        let reading = try #require(PressureReading(parsing: text))
        #expect(reading.some == .init(avg10: 3.47, avg60: 0.67, avg300: 0.14, total: 508_426))
        #expect(reading.full == .init(avg10: 3.32, avg60: 0.64, avg300: 0.13, total: 490_987))
        #expect(PressureReading(parsing: "some avg10=x avg60=0 avg300=0 total=1\n") == nil)
        #expect(PressureReading(parsing: "") == nil)
        #expect(PressureReading(parsing: "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n")?.full.total == 0)
    }

    @Test func aThresholdIsWrittenAsTheKernelTakesIt() {
        #expect(Self.warning.triggerText == "some 70000 2000000")
        #expect(Self.warning.description == "some 70ms 2s")
        #expect(StallThreshold(.full, stall: .microseconds(1500), window: .milliseconds(500)).description == "full 1500us 500ms")
    }

    @Test func stallBelowTheWarningLevelDecidesNothing() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        for _ in 0..<20 {
            // 60 ms of some stall per 2 s: under 70 ms.
            #expect(policy.observe(machine.pass(.seconds(1), some: 30_000, full: 10_000), now: machine.now).isEmpty)
        }
        #expect(policy.level == .normal)
        #expect(policy.nextReading == nil)
    }

    @Test func readingsThatDoNotReachBackAWindowMeasureNothing() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.zero), now: machine.now)
        // Much stall, but the readings span only 1.5 s of the 2 s window.
        #expect(policy.observe(machine.pass(.milliseconds(1500), some: 900_000, full: 900_000), now: machine.now).isEmpty)
        #expect(policy.measuredStall(.some, over: .seconds(2), now: machine.now) == nil)
        let decisions = policy.observe(machine.pass(.milliseconds(500)), now: machine.now)
        #expect(decisions.contains(.purge), "a whole window now: 900 ms of full stall in it")
    }

    @Test func theStallAtAWindowsStartIsInterpolatedBetweenReadings() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.zero), now: machine.now)
        _ = policy.observe(machine.pass(.seconds(2), some: 200_000), now: machine.now)
        _ = policy.observe(machine.pass(.seconds(1), some: 10_000), now: machine.now)
        // The window [1 s, 3 s]: half of the first 200 ms, and the 10 ms after.
        #expect(policy.measuredStall(.some, over: .seconds(2), now: machine.now) == .milliseconds(110))
    }

    @Test func runningAppsAreWarnedAtMostOncePerWindow() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.zero), now: machine.now)
        var warnings: [TestInstant] = []
        for _ in 0..<20 {
            // 80 ms of some stall per second: over the warning level, never critical (no full stall).
            let decisions = policy.observe(machine.pass(.milliseconds(500), some: 40_000), now: machine.now)
            #expect(!decisions.contains(.purge))
            if decisions.contains(.warn) { warnings.append(machine.now) }
        }
        #expect(policy.level == .warning)
        // From 2 s on (the first whole window), then every 2 s.
        #expect(warnings.map(\.offset) == [2, 4, 6, 8, 10].map { .seconds($0) })
    }

    @Test func aTriggerThatFiredIsTakenAtItsWord() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        // The first reading, with no history: the kernel measured the window.
        #expect(
            policy.observe(machine.pass(.seconds(5)), fired: [.warning], now: machine.now)
                == [.level(from: .normal, to: .warning), .warn]
        )
        #expect(policy.nextReading == machine.now.advanced(by: .seconds(2)), "read again to see the pressure end")
        #expect(policy.observe(machine.pass(.seconds(1)), fired: [.warning], now: machine.now).isEmpty, "warned a second ago")
        let critical = policy.observe(machine.pass(.seconds(1)), fired: [.critical], now: machine.now)
        #expect(critical == [.level(from: .warning, to: .critical), .warn, .purge])
        #expect(policy.purging)
    }

    @Test func purgingGoesOnWhileThePurgeLeftStallAtTheWarningLevel() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.zero), now: machine.now)
        #expect(policy.observe(machine.pass(.seconds(2), some: 300_000, full: 300_000), now: machine.now).contains(.purge))
        let firstPurge = machine.now
        #expect(policy.nextReading == firstPurge.advanced(by: .seconds(2)), "one warning window after the purge")
        // Still pressed within the settling window: no second purge yet.
        #expect(!policy.observe(machine.pass(.seconds(1), some: 150_000, full: 150_000), now: machine.now).contains(.purge))
        // A whole window after the purge with 100 ms of some stall, no full stall: over the warning level.
        #expect(policy.observe(machine.pass(.seconds(1), some: 0, full: 0), now: machine.now).contains(.purge))
        #expect(policy.nextReading == machine.now.advanced(by: .seconds(2)))
        // The next window after that purge: 40 ms of some stall, under the warning level: purging stops.
        let calm = policy.observe(machine.pass(.seconds(2), some: 40_000), now: machine.now)
        #expect(!calm.contains(.purge))
        #expect(!policy.purging)
        #expect(policy.level == .normal)
    }

    @Test func purgingStopsWhenNothingIsLeftToPurge() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.zero), now: machine.now)
        #expect(policy.observe(machine.pass(.seconds(2), full: 300_000), now: machine.now).contains(.purge))
        policy.nothingLeftToPurge()
        #expect(!policy.purging)
        // Critical again: a new episode begins at once.
        #expect(policy.observe(machine.pass(.seconds(1), full: 300_000), now: machine.now).contains(.purge))
    }

    @Test func aStaleReadingIsIgnored() {
        var policy = Policy(warning: Self.warning, critical: Self.critical)
        var machine = Machine()
        _ = policy.observe(machine.pass(.seconds(3)), now: machine.now)
        let reading = machine.pass(.zero, some: 1_000_000, full: 1_000_000)
        #expect(policy.observe(reading, fired: [.critical], now: .zero).isEmpty)
    }

    @Test func purgeOrderTakesTheLargestFirstThenByName() {
        let order = PurgeOrder.largestFirst(["b": 10, "a": 10, "c": 300, "d": 0])
        #expect(order == ["c", "a", "b", "d"])
    }
}
