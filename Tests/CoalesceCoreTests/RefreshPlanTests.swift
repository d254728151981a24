import CoalesceCore
import Testing

/// Scheduled background refreshes on time that moves only when the test says so: windows and shared slots, the
/// conditions, periods, backoff after failures, expired budgets and the late policy.
@Suite struct RefreshPlanTests {
    typealias Plan = RefreshPlan<String>

    static let online = SystemConditions([.network: true, .notOnBattery: true])

    @Test func aRefreshRunsNoEarlierThanItsDateAndAtTheEndOfItsWindow() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "sync", earliest: 100, flex: .seconds(60)), for: "mail")
        var slot = plan.due(now: 0, conditions: Self.online)
        #expect(slot.runs.isEmpty && slot.next == 160, "nothing before the window's end")
        slot = plan.due(now: 120, conditions: Self.online)
        #expect(slot.runs.isEmpty && slot.next == 160, "inside its window it waits for the slot")
        slot = plan.due(now: 160, conditions: Self.online)
        #expect(slot.runs == [Plan.Key(app: "mail", id: "sync")])
        #expect(plan.running[Plan.Key(app: "mail", id: "sync")] == Plan.Run(started: 160, ends: 190))
        #expect(slot.next == 190, "its budget's end")
    }

    /// Three apps whose windows overlap run in one slot; a fourth, due after the slot, waits for its own.
    @Test func refreshesWhoseWindowsOverlapShareOneSlot() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "a", earliest: 100, flex: .seconds(300)), for: "mail")
        plan.schedule(RefreshRequest(id: "b", earliest: 150, flex: .seconds(60)), for: "maps")
        plan.schedule(RefreshRequest(id: "c", earliest: 200, flex: .seconds(600)), for: "news")
        plan.schedule(RefreshRequest(id: "d", earliest: 250, flex: .seconds(600)), for: "tv")
        let slot = plan.due(now: 210, conditions: Self.online)
        #expect(slot.runs.map(\.app) == ["mail", "maps", "news"], "at maps' window end, 210, every refresh already due")
        #expect(slot.next == 240, "the budgets' end")
        #expect(plan.due(now: 240, conditions: Self.online).expired.count == 3)
    }

    @Test func aRefreshWaitsForItsConditionsPastItsWindowAndRunsAsTheyHold() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "sync", earliest: 100, flex: .seconds(10), requires: [.network, .notOnBattery]), for: "mail")
        let offline = SystemConditions([.network: false, .notOnBattery: true])
        var slot = plan.due(now: 500, conditions: offline)
        #expect(slot.runs.isEmpty && slot.next == nil, "no timer: a change of conditions is the input")
        #expect(offline.unmet([.network, .notOnBattery]) == [.network])
        slot = plan.due(now: 600, conditions: SystemConditions([.network: true, .notOnBattery: false]))
        #expect(slot.runs.isEmpty)
        slot = plan.due(now: 700, conditions: Self.online)
        #expect(slot.runs.map(\.id) == ["sync"])
        #expect(SystemConditions().holds(.idle), "a condition nobody reports counts as holding")
    }

    @Test func aPeriodicRefreshIsDueAPeriodAfterItsRunStartedAndAOneTimeOneEnds() {
        var plan = Plan()
        let periodic = Plan.Key(app: "mail", id: "sync")
        let once = Plan.Key(app: "mail", id: "once")
        plan.schedule(RefreshRequest(id: "sync", earliest: 0, interval: .seconds(900), flex: .seconds(0)), for: "mail")
        plan.schedule(RefreshRequest(id: "once", earliest: 0, flex: .seconds(0)), for: "mail")
        #expect(plan.due(now: 10, conditions: Self.online).runs == [once, periodic])
        #expect(plan.finished(periodic, .done, now: 20)?.due == 910)
        #expect(plan.finished(once, .done, now: 20) == nil)
        #expect(plan.refreshes(of: "mail").map(\.request.id) == ["sync"])
    }

    @Test func failedAndExpiredRunsAreTriedAgainAfterABackoffThatDoubles() {
        var plan = Plan()
        let key = Plan.Key(app: "mail", id: "sync")
        plan.schedule(RefreshRequest(id: "sync", earliest: 0, interval: .seconds(900), flex: .seconds(0), budget: .seconds(30)), for: "mail")
        _ = plan.due(now: 0, conditions: Self.online)
        #expect(plan.finished(key, .failed, now: 5)?.due == 35)
        _ = plan.due(now: 35, conditions: Self.online)
        let slot = plan.due(now: 65, conditions: Self.online)
        #expect(slot.expired == [key], "its budget ran out")
        #expect(plan.tasks[key]?.failures == 2 && plan.tasks[key]?.due == 125 && plan.tasks[key]?.lastOutcome == .expired)
        _ = plan.due(now: 125, conditions: Self.online)
        #expect(plan.finished(key, .done, now: 130)?.failures == 0)
        #expect(RefreshTask.backoff(after: 20) == .seconds(3600), "at most an hour")
    }

    @Test func theLatePolicySaysWhetherAMissedWindowRunsOnceOrIsSkipped() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "hourly", earliest: 0, interval: .seconds(3600), flex: .seconds(60), late: .skip), for: "mail")
        plan.schedule(RefreshRequest(id: "gone", earliest: 0, flex: .seconds(60), late: .skip), for: "mail")
        plan.schedule(RefreshRequest(id: "catchUp", earliest: 0, interval: .seconds(3600), flex: .seconds(60)), for: "mail")
        // The daemon was down for ten hours.
        let slot = plan.due(now: 36_100, conditions: Self.online)
        #expect(slot.runs.map(\.id) == ["catchUp"], "missed runs come to one")
        #expect(slot.skipped.map(\.id) == ["gone", "hourly"])
        #expect(plan.tasks[Plan.Key(app: "mail", id: "hourly")]?.due == 39_600, "its next period")
        #expect(plan.tasks[Plan.Key(app: "mail", id: "gone")] == nil)
    }

    /// The slot's timer fires just after the window's end: a `skip` refresh alone still runs then.
    @Test func aSkipRefreshRunsAtItsOwnSlotJustAfterItsWindowsEnd() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "s", earliest: 10, flex: .seconds(60), late: .skip), for: "mail")
        #expect(plan.due(now: 0, conditions: Self.online).next == 70)
        let slot = plan.due(now: 70.001, conditions: Self.online)
        #expect(slot.runs.map(\.id) == ["s"] && slot.skipped.isEmpty)
    }

    @Test func scheduleReplacesOrKeepsAnIdAndCancelRemovesIt() {
        var plan = Plan()
        plan.schedule(RefreshRequest(id: "sync", earliest: 100), for: "mail")
        let kept = plan.schedule(RefreshRequest(id: "sync", earliest: 500), for: "mail", keeping: .keep)
        #expect(!kept.new && kept.task.due == 100)
        let replaced = plan.schedule(RefreshRequest(id: "sync", earliest: 500), for: "mail")
        #expect(replaced.new && replaced.task.due == 500)
        #expect(plan.cancel("sync", of: "mail") && !plan.cancel("sync", of: "mail"))
    }

    /// Random requests, conditions and times: no refresh ever runs before it is due or while a condition it requires
    /// does not hold, and none runs twice at once.
    @Test(arguments: 0..<50)
    func noRefreshRunsEarlyOrWithItsConditionsUnmet(seed: UInt64) {
        var random = LifecyclePropertyTests.SeededGenerator(state: seed)
        var plan = Plan()
        var now = 0.0
        for step in 0..<200 {
            now += Double(random.next() % 120)
            switch random.next() % 4 {
            case 0:
                let requires = Set(RefreshCondition.allCases.filter { _ in random.next() % 3 == 0 })
                plan.schedule(
                    RefreshRequest(
                        id: "r\(random.next() % 5)", earliest: now + Double(random.next() % 600),
                        interval: random.next() % 2 == 0 ? .seconds(Int64(300 + random.next() % 600)) : nil,
                        flex: .seconds(Int64(random.next() % 300)), requires: requires, budget: .seconds(30),
                        late: random.next() % 2 == 0 ? .runOnce : .skip
                    ),
                    for: "app\(random.next() % 4)"
                )
            case 1:
                if let key = plan.running.keys.sorted().first {
                    plan.finished(key, random.next() % 2 == 0 ? .done : .failed, now: now)
                }
            default:
                let conditions = SystemConditions(
                    Dictionary(uniqueKeysWithValues: RefreshCondition.allCases.map { ($0, random.next() % 4 != 0) })
                )
                let before = plan.running
                let tasks = plan.tasks
                let slot = plan.due(now: now, conditions: conditions)
                for key in slot.runs {
                    #expect(before[key] == nil || slot.expired.contains(key), "step \(step), seed \(seed): ran twice")
                    let task = tasks[key]!
                    #expect(task.due <= now, "step \(step), seed \(seed): ran before it was due")
                    #expect(conditions.unmet(task.request.requires).isEmpty, "step \(step), seed \(seed): ran with conditions unmet")
                }
                if let next = slot.next { #expect(next >= now) }
            }
        }
    }
}
