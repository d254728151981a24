@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Synchronization
import Testing

/// The wait for each day boundary, on an injected wall clock and sleep: each boundary is told once, in order, and
/// a wait that ends early (the clock set back under it) is counted again without telling anything.
@Suite struct DayBoundaryWatchTests {
    /// A wall clock that moves only when the watch sleeps, by what it sleeps (less the cuts, one per sleep); once
    /// `limit` boundaries were told, a sleep lasts until the watch is stopped.
    final class FakeTime: Sendable {
        let now: Mutex<Double>
        let cut = Mutex<[Double]>([])
        let told = Mutex<[DayBoundary]>([])
        let limit: Int
        init(_ start: Double, limit: Int) {
            self.now = Mutex(start)
            self.limit = limit
        }

        func sleep(_ duration: Duration) async throws {
            if self.told.withLock({ $0.count }) >= self.limit { try await Task.sleep(for: .seconds(3_600)) }
            try Task.checkCancellation()
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            let cut = self.cut.withLock { $0.isEmpty ? 0 : $0.removeFirst() }
            self.now.withLock { $0 += seconds - cut }
            await Task.yield()
        }
    }

    static func watch(_ time: FakeTime, zone: ZoneRules, until count: Int) async throws -> [DayBoundary] {
        let watch = DayBoundaryWatch(
            zone: { zone }, wallSeconds: { time.now.withLock { $0 } }, sleep: { try await time.sleep($0) },
            reached: { boundary in time.told.withLock { $0.append(boundary) } }
        )
        watch.rearm()
        defer { watch.stop() }
        try await waitUntil("\(count) day boundaries told", poll: .milliseconds(1)) { time.told.withLock { $0.count } >= count }
        return time.told.withLock { $0 }
    }

    @Test func eachBoundaryIsToldOnceInOrderAcrossADaylightSavingChange() async throws {
        let berlin = try ZoneDatabase().rules(named: "Europe/Berlin")
        let time = FakeTime(1_774_699_200, limit: 3)  // 2026-03-28 12:00 UTC
        let told = try await Self.watch(time, zone: berlin, until: 3)
        #expect(told == [
            DayBoundary(seconds: 1_774_738_800, kind: .midnight),
            DayBoundary(seconds: 1_774_746_000, kind: .offsetChange),
            DayBoundary(seconds: 1_774_821_600, kind: .midnight),
        ])
    }

    @Test func aWaitThatEndsEarlyIsCountedAgainWithoutTellingAnything() async throws {
        let time = FakeTime(86_400 * 3 + 60, limit: 2)
        time.cut.withLock { $0 = [3_600] }  // the first sleep ends an hour short: the clock was set back
        let told = try await Self.watch(time, zone: .utc, until: 2)
        #expect(told == [DayBoundary(seconds: 86_400 * 4, kind: .midnight), DayBoundary(seconds: 86_400 * 5, kind: .midnight)])
    }
}
