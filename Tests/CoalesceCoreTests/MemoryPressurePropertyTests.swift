import CoalesceCore
import PropertyBased
import Testing

/// Random readings, triggers and empty purges: the policy never warns twice within a window, never purges twice
/// within its settling time in one episode, starts purging only at the critical level, goes on only when the stall
/// since the last purge reached the warning level, and decides nothing for a quiet machine.
@Suite struct MemoryPressurePropertyTests {
    struct Step {
        var after: Duration
        var some: UInt64
        var full: UInt64
        var fired: Set<PressureLevel>
        var nothingToPurge: Bool

        /// One step from a random code: how long passes, how much stall, which trigger fired, whether the shell found
        /// nothing to purge.
        init(_ code: Int) {
            var code = code
            func take(_ count: Int) -> Int {
                defer { code /= count }
                return code % count
            }
            self.after = .milliseconds([100, 250, 500, 1000, 2000, 3000][take(6)])
            self.some = UInt64([0, 0, 20_000, 60_000, 150_000][take(5)])
            self.full = UInt64([0, 0, 0, 50_000, 200_000][take(5)])
            self.fired = [[], [], [], [.warning], [.critical]][take(5)]
            self.nothingToPurge = take(4) == 0
        }

        static let codes = 6 * 5 * 5 * 5 * 4
    }

    @Test func decisionsKeepTheirSpacingAndReasons() async {
        await propertyCheck(count: 400, input: Gen.int(in: 0...(Step.codes - 1)).array(of: 0...60)) { codes in
            let warning = StallThreshold(.some, stall: .milliseconds(70), window: .seconds(2))
            let critical = StallThreshold(.full, stall: .milliseconds(100), window: .seconds(2))
            var policy = MemoryPressurePolicy<TestInstant>(warning: warning, critical: critical)
            var now = TestInstant.zero
            var some: UInt64 = 0
            var full: UInt64 = 0
            var lastWarning: TestInstant?
            /// The last purge of the episode under way, with the some total then.
            var lastPurge: (at: TestInstant, some: UInt64)?
            var problems: [String] = []
            for (index, code) in codes.enumerated() {
                let step = Step(code)
                now = now.advanced(by: step.after)
                some += step.some
                full += step.full
                let reading = PressureReading(some: .init(total: some), full: .init(total: full))
                let decisions = policy.observe(reading, fired: step.fired, now: now)
                if decisions.contains(.warn) {
                    if let lastWarning, lastWarning.duration(to: now) < warning.window {
                        problems.append("step \(index): warned \(lastWarning.duration(to: now)) after the last warning")
                    }
                    if policy.level == .normal { problems.append("step \(index): warned at the normal level") }
                    lastWarning = now
                }
                if decisions.contains(.purge) {
                    if let episode = lastPurge {
                        if episode.at.duration(to: now) < policy.settle {
                            problems.append("step \(index): purged \(episode.at.duration(to: now)) after the last purge")
                        }
                        if some - episode.some < 70_000 {
                            problems.append("step \(index): purged again with \(some - episode.some) µs of stall since the last")
                        }
                    } else if policy.level != .critical {
                        problems.append("step \(index): began purging at the \(policy.level) level")
                    }
                    lastPurge = (now, some)
                    if step.nothingToPurge {
                        policy.nothingLeftToPurge()
                        lastPurge = nil
                    }
                } else if !policy.purging {
                    lastPurge = nil
                }
                if policy.purging != (lastPurge != nil) {
                    problems.append("step \(index): the policy says purging \(policy.purging)")
                }
            }
            #expect(problems == [], "steps: \(codes)")
        }
    }

    @Test func aQuietMachineIsLeftAlone() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...5).array(of: 1...50)) { delays in
            var policy = MemoryPressurePolicy<TestInstant>(
                warning: StallThreshold(.some, stall: .milliseconds(1), window: .milliseconds(500)),
                critical: StallThreshold(.full, stall: .milliseconds(1), window: .milliseconds(500))
            )
            var now = TestInstant.zero
            let reading = PressureReading(some: .init(total: 123_456), full: .init(total: 789))
            for delay in delays {
                now = now.advanced(by: .milliseconds([0, 1, 100, 499, 500, 5000][delay]))
                #expect(policy.observe(reading, now: now).isEmpty)
            }
            #expect(policy.level == .normal)
        }
    }
}
