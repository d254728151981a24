import CoalesceCore
import Testing

/// An interruption begins with its first cause and ends with its last, whatever their order.
@Suite struct InterruptionsTests {
    @Test func theFirstCauseBeginsItAndTheLastEndsIt() {
        var interruptions = Interruptions()
        #expect(interruptions.begin(.sleep) == true)
        #expect(interruptions.begin(.lock) == false, "already interrupted")
        #expect(interruptions.begin(.lock) == false)
        #expect(interruptions.end(.requested) == false, "a cause it does not have ends nothing")
        #expect(interruptions.end(.sleep) == false, "the lock remains")
        #expect(interruptions.causes == [.lock])
        #expect(interruptions.end(.lock) == true)
        #expect(interruptions.isEmpty)
        #expect(interruptions.end(.lock) == false, "ended once")
    }

    @Test func eachCauseHasTheJournalsReasons() {
        #expect(InterruptionCause.allCases.map(\.beginning) == [.interruptionBegan, .interruptionBegan, .sleep, .lock])
        #expect(InterruptionCause.allCases.map(\.ending) == [.interruptionEnded, .interruptionEnded, .wake, .unlock])
    }
}
