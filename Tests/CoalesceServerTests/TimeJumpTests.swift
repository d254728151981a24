@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Logging
import Synchronization
import Testing

/// Timers on the monotonic clock stand still while the machine sleeps: what keeps one (a background refresh's next
/// slot) is told of each wake and each setting of the wall clock, and looks again.
@Suite struct TimeJumpTests {
    @Test func aWakeAndAClockSetAreToldToWhatWaitsOnTheMonotonicClock() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let place = ClockZoneLocaleFollower(apps: fixture.manager, logger: Logger(label: "test", factory: { _ in fixture.logs }))
            defer { place.stop() }
            let told = Mutex(0)
            place.onTimeJump { told.withLock { $0 += 1 } }
            place.willSleep()
            place.didWake()
            #expect(told.withLock { $0 } == 1, "the wake")
            place.clockChanged()
            #expect(told.withLock { $0 } == 2, "the clock set")
        }
    }
}
