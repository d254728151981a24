import CoalesceCore
import Testing

/// The wall clock's jumps that apps hear of: a setting, not the report the kernel makes of a resume.
@Suite struct ClockChangeFilterTests {
    typealias Filter = ClockChangeFilter<TestInstant>

    func at(_ seconds: Int) -> TestInstant { TestInstant.zero.advanced(by: .seconds(seconds)) }

    /// Feeds clock reports at the given seconds and returns which were news.
    func news(_ filter: inout Filter, reportsAt seconds: Int...) -> [Bool] {
        seconds.map { filter.clockChanged(now: self.at($0)) }
    }

    @Test func aSettingWhileAwakeIsNews() {
        var filter = Filter()
        #expect(self.news(&filter, reportsAt: 10, 11) == [true, true])
    }

    @Test func theResumesReportWhileAsleepIsNotNewsAndTheWakeAfterItLeavesLaterSettingsAlone() {
        var filter = Filter()
        filter.willSleep(now: self.at(10))
        // The kernel's resume report came before PrepareForSleep(false).
        #expect(self.news(&filter, reportsAt: 11) == [false])
        filter.didWake(now: self.at(12))
        // Someone set the clock right after the wake.
        #expect(self.news(&filter, reportsAt: 13) == [true])
    }

    @Test func theResumesReportAfterTheWakeIsNotNewsOnce() {
        var filter = Filter()
        filter.willSleep(now: self.at(10))
        filter.didWake(now: self.at(20))
        #expect(self.news(&filter, reportsAt: 21, 22) == [false, true])
    }

    @Test func aReportPastTheWindowAfterTheWakeIsNews() {
        var filter = Filter(resumeWindow: .seconds(5))
        filter.willSleep(now: self.at(10))
        filter.didWake(now: self.at(20))
        #expect(self.news(&filter, reportsAt: 26) == [true])
    }

    @Test func aWakeWithoutASleepChangesNothing() {
        var filter = Filter()
        filter.didWake(now: self.at(5))
        #expect(self.news(&filter, reportsAt: 6) == [true])
    }
}
