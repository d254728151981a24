import CoalesceCore
import Testing

/// The scheduler: each trigger kind, repeats, clock and time-zone changes, late fires by policy, limits, upsert,
/// cancel and restart.
@Suite struct AlertSchedulerTests {
    let berlin: ZoneRules
    let newYork: ZoneRules

    init() throws {
        self.berlin = try ZoneFiles.rules("Europe/Berlin")
        self.newYork = try ZoneFiles.rules("America/New_York")
    }

    @Test func noTriggerPresentsAtOnce() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let actions = try scheduler.schedule(request("hello", .now), for: clockApp, now: reading("2026-11-26 12:00:00"))
        #expect(actions.presented.map(\.id) == ["hello"])
        #expect(actions.presented.first?.late == false)
        #expect(actions.forgotten == [AlertKey(app: clockApp, id: "hello")])
        #expect(scheduler.records.isEmpty)
        #expect(actions.armed?.wall == nil && actions.armed?.boot == nil)
    }

    @Test func anInstantFiresThenIsForgotten() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let now = reading("2026-11-26 12:00:00")
        let scheduled = try scheduler.schedule(request("tea", .at(utc("2026-11-26 12:10:00"))), for: clockApp, now: now)
        #expect(scheduled.kept.map(\.key.id) == ["tea"])
        #expect(scheduled.armed?.wall == utc("2026-11-26 12:10:00"))
        #expect(scheduler.fired(now: now.advanced(by: .seconds(300))).presented.isEmpty)
        let fired = scheduler.fired(now: now.advanced(by: .seconds(600)))
        #expect(fired.presented.map(\.id) == ["tea"])
        #expect(fired.presented.first?.fires == [AlertFire(id: "tea", number: 1, date: utc("2026-11-26 12:10:00"))])
        #expect(fired.forgotten == [AlertKey(app: clockApp, id: "tea")])
        #expect(scheduler.fired(now: now.advanced(by: .seconds(900))).presented.isEmpty)
    }

    @Test func anIntervalRunsOnTheBootClockWhateverTheWallClockDoes() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let now = reading("2026-11-26 12:00:00", boot: 1_000)
        let scheduled = try scheduler.schedule(request("egg", .after(.seconds(300), repeats: false)), for: clockApp, now: now)
        #expect(scheduled.armed?.boot == BootTime(nanoseconds: 1_300_000_000_000))
        // The clock is set back an hour, 100 s later: the interval's wall date moves, its boot date does not.
        let setBack = ClockReading(wall: utc("2026-11-26 11:01:40"), boot: BootTime(nanoseconds: 1_100_000_000_000))
        let changed = scheduler.clockChanged(now: setBack)
        #expect(changed.kept.first?.intervalDue == utc("2026-11-26 11:05:00"))
        #expect(scheduler.pending(of: clockApp, now: setBack).map(\.next) == [utc("2026-11-26 11:05:00")])
        #expect(scheduler.fired(now: setBack.advanced(by: .seconds(199))).presented.isEmpty)
        let fired = scheduler.fired(now: setBack.advanced(by: .seconds(200)))
        #expect(fired.presented.map(\.id) == ["egg"])
        #expect(fired.presented.first?.late == false)
    }

    @Test func aRepeatingIntervalIsAtLeastAMinuteAndRepeats() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let now = reading("2026-11-26 12:00:00")
        #expect(throws: AlertError.repeatingIntervalTooShort(.seconds(59))) {
            try scheduler.schedule(request("fast", .after(.seconds(59), repeats: true)), for: clockApp, now: now)
        }
        #expect(throws: AlertError.intervalNotPositive(.zero)) {
            try scheduler.schedule(request("zero", .after(.zero, repeats: false)), for: clockApp, now: now)
        }
        _ = try scheduler.schedule(request("tick", .after(.seconds(60), repeats: true)), for: clockApp, now: now)
        var numbers: [Int] = []
        for minute in 1...3 {
            let fired = scheduler.fired(now: now.advanced(by: .seconds(60 * Int64(minute))))
            numbers += fired.presented.flatMap(\.fires).map(\.number)
            #expect(fired.armed?.boot == now.boot.advanced(by: .seconds(60 * Int64(minute + 1))))
        }
        #expect(numbers == [1, 2, 3])
        #expect(scheduler.records.first?.fires == 3)
    }

    @Test func aZonedCalendarRuleFiresAtItsWallTimeAndRearms() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let rule = AlertTrigger.calendar(CalendarComponents(hour: 8, minute: 30), zone: .zoned(self.berlin), repeats: true)
        let scheduled = try scheduler.schedule(request("alarm", rule), for: clockApp, now: reading("2026-11-26 12:00:00"))
        #expect(scheduled.armed?.wall == utc("2026-11-27 07:30:00"))
        let fired = scheduler.fired(now: reading("2026-11-27 07:30:00"))
        #expect(fired.presented.map(\.date) == [utc("2026-11-27 07:30:00")])
        #expect(fired.kept.first?.lastFire == utc("2026-11-27 07:30:00"))
        #expect(fired.armed?.wall == utc("2026-11-28 07:30:00"))
        #expect(scheduler.pending(of: clockApp, now: reading("2026-11-27 07:30:00")).map(\.next) == [utc("2026-11-28 07:30:00")])
    }

    @Test func aCalendarRuleThatDoesNotRepeatFiresOnce() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let rule = AlertTrigger.calendar(CalendarComponents(day: 31, hour: 9), zone: .floating, repeats: false)
        _ = try scheduler.schedule(request("once", rule), for: clockApp, now: reading("2027-04-01 00:00:00"))
        // April has no 31st: the date is 31 May, not 1 May.
        #expect(scheduler.pending(of: clockApp, now: reading("2027-04-01 00:00:00")).map(\.next) == [utc("2027-05-31 09:00:00")])
        let fired = scheduler.fired(now: reading("2027-05-31 09:00:00"))
        #expect(fired.presented.count == 1)
        #expect(fired.forgotten.count == 1)
        #expect(scheduler.records.isEmpty)
    }

    @Test func aRuleThatNeverComesIsRefused() {
        var scheduler = AlertScheduler(localZone: .utc)
        let rule = AlertTrigger.calendar(CalendarComponents(month: 4, day: 31), zone: .zoned(self.berlin), repeats: true)
        #expect(throws: AlertError.neverFires(CalendarComponents(month: 4, day: 31), zone: "Europe/Berlin")) {
            try scheduler.schedule(request("never", rule), for: clockApp, now: reading("2026-11-26 12:00:00"))
        }
        #expect(scheduler.records.isEmpty)
    }

    @Test func aClockSetForwardHandlesWhatItPassedOverByPolicy() throws {
        let cases: [(LatePolicy, presentations: [Int], dropped: Int)] = [
            (.coalesce, [3], 0), (.deliver, [1, 1, 1], 0), (.dropAfter(.seconds(36 * 3600)), [1], 2),
        ]
        for (policy, presentations, dropped) in cases {
            var scheduler = AlertScheduler(localZone: .utc)
            let rule = AlertTrigger.calendar(CalendarComponents(hour: 8), zone: .floating, repeats: true)
            _ = try scheduler.schedule(request("daily", rule, late: policy), for: clockApp, now: reading("2026-11-26 12:00:00"))
            // Set forward to the 30th at 07:00: the 27th, 28th and 29th at 08:00 passed.
            let actions = scheduler.clockChanged(now: reading("2026-11-30 07:00:00"))
            #expect(actions.presented.map(\.count) == presentations, "\(policy)")
            #expect(actions.presented.allSatisfy { $0.late }, "\(policy)")
            #expect(actions.drops.flatMap(\.fires).count == dropped, "\(policy)")
            #expect(actions.armed?.wall == utc("2026-11-30 08:00:00"), "\(policy)")
        }
    }

    @Test func aClockSetBackFiresNoDateAgain() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let rule = AlertTrigger.calendar(CalendarComponents(hour: 8), zone: .floating, repeats: true)
        _ = try scheduler.schedule(request("daily", rule), for: clockApp, now: reading("2026-11-26 07:00:00"))
        #expect(scheduler.fired(now: reading("2026-11-26 08:00:00")).presented.count == 1)
        // Back an hour, to 07:00: 08:00 today fired already.
        let back = scheduler.clockChanged(now: reading("2026-11-26 07:00:00"))
        #expect(back.armed?.wall == utc("2026-11-27 08:00:00"))
        #expect(scheduler.fired(now: reading("2026-11-26 08:00:00")).presented.isEmpty)
    }

    @Test func aClockSetBackBeforeARuleFiredCountsItsDatesFromThere() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let rule = AlertTrigger.calendar(CalendarComponents(hour: 8), zone: .floating, repeats: true)
        // Scheduled while the clock was five days ahead; it is corrected before the rule fired.
        _ = try scheduler.schedule(request("daily", rule), for: clockApp, now: reading("2026-12-01 10:00:00"))
        let back = scheduler.clockChanged(now: reading("2026-11-26 10:00:00"))
        #expect(back.armed?.wall == utc("2026-11-27 08:00:00"))
        #expect(back.kept.first?.since == utc("2026-11-26 10:00:00"))
    }

    @Test func floatingRulesFollowTheZoneAndZonedOnesKeepTheirs() throws {
        var scheduler = AlertScheduler(localZone: self.berlin)
        let now = reading("2026-11-26 12:00:00")
        let components = CalendarComponents(hour: 8)
        _ = try scheduler.schedule(request("floating", .calendar(components, zone: .floating, repeats: true)), for: clockApp, now: now)
        _ = try scheduler.schedule(request("zoned", .calendar(components, zone: .zoned(self.berlin), repeats: true)), for: clockApp, now: now)
        let before = scheduler.pending(of: clockApp, now: now).map { [$0.request.id: $0.next] }
        #expect(before == [["floating": utc("2026-11-27 07:00:00")], ["zoned": utc("2026-11-27 07:00:00")]])
        let moved = scheduler.timeZoneChanged(to: self.newYork, now: now)
        #expect(moved.presented.isEmpty)
        let after = Dictionary(uniqueKeysWithValues: scheduler.pending(of: clockApp, now: now).map { ($0.request.id, $0.next) })
        // 12:00 UTC is 07:00 in New York: 08:00 there comes the same day.
        #expect(after == ["floating": utc("2026-11-26 13:00:00"), "zoned": utc("2026-11-27 07:00:00")])
        #expect(moved.armed?.wall == utc("2026-11-26 13:00:00"))
    }

    @Test func afterALongSleepEachPolicyHandlesTheMissedFires() throws {
        // Asleep three hours: an hourly calendar rule and a repeating interval of an hour each missed three fires.
        let start = reading("2026-11-26 12:00:00", boot: 1_000)
        let woke = start.advanced(by: .seconds(3 * 3600 + 1800))
        for policy in [LatePolicy.deliver, .coalesce, .dropAfter(.seconds(5000))] {
            var scheduler = AlertScheduler(localZone: .utc)
            let hourly = AlertTrigger.calendar(CalendarComponents(minute: 0), zone: .floating, repeats: true)
            _ = try scheduler.schedule(request("hourly", hourly, late: policy, thread: "t"), for: clockApp, now: start)
            _ = try scheduler.schedule(request("interval", .after(.seconds(3600), repeats: true), late: policy, thread: "t"), for: clockApp, now: start)
            let actions = scheduler.resumed(now: woke)
            let presented = actions.presented
            switch policy {
            case .deliver:
                #expect(presented.count == 6)
                #expect(presented.allSatisfy { $0.late && $0.count == 1 })
                #expect(presented.map(\.date) == presented.map(\.date).sorted())
            case .coalesce:
                // One presentation for the app's thread, standing for all six.
                #expect(presented.count == 1)
                #expect(presented.first?.count == 6)
                // The content is the latest fire's; of two at once, the greater id's.
                #expect(presented.first?.id == "interval")
            case .dropAfter:
                // 13:00 and 14:00 are more than 5,000 s late, and so are the interval's first two.
                #expect(presented.map(\.date) == [utc("2026-11-26 15:00:00"), utc("2026-11-26 15:00:00")])
                #expect(actions.drops.map(\.fires.count) == [2, 2])
                #expect(actions.drops.first?.reason == .pastGrace(.seconds(5000)))
            }
            #expect(actions.armed?.wall == utc("2026-11-26 16:00:00"))
            #expect(actions.armed?.boot == start.boot.advanced(by: .seconds(4 * 3600)))
        }
    }

    @Test func coalescingIsPerAppAndThread() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let start = reading("2026-11-26 12:00:00")
        for (app, id, thread) in [(clockApp, "a", "x"), (clockApp, "b", "x"), (clockApp, "c", "y"), (mailApp, "d", "x")] {
            _ = try scheduler.schedule(request(id, .at(utc("2026-11-26 13:00:00")), thread: thread), for: app, now: start)
        }
        let presented = scheduler.resumed(now: reading("2026-11-26 18:00:00")).presented
        #expect(presented.map(\.count).sorted() == [1, 1, 2])
        #expect(Set(presented.map { "\($0.app)/\($0.content.threadID ?? "")" }).count == 3)
    }

    @Test func aFireHandledWithinLateAfterIsOnTime() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        _ = try scheduler.schedule(request("a", .at(utc("2026-11-26 13:00:00")), late: .dropAfter(.zero)), for: clockApp, now: reading("2026-11-26 12:00:00"))
        let fired = scheduler.fired(now: reading("2026-11-26 13:00:59"))
        #expect(fired.presented.map(\.late) == [false])
    }

    @Test func thePendingLimitRefusesOneMoreWithTheCount() throws {
        var scheduler = AlertScheduler(configuration: AlertConfiguration(pendingLimit: 3), localZone: .utc)
        let now = reading("2026-11-26 12:00:00")
        for id in ["a", "b", "c"] {
            _ = try scheduler.schedule(request(id, .at(utc("2026-11-27 12:00:00"))), for: clockApp, now: now)
        }
        let error = #expect(throws: AlertError.pendingLimit(limit: 3, pending: 3)) {
            try scheduler.schedule(request("d", .at(utc("2026-11-27 12:00:00"))), for: clockApp, now: now)
        }
        #expect(error?.description.contains("at most 3") == true)
        // Replacing one is no new request; another app has its own limit.
        _ = try scheduler.schedule(request("a", .at(utc("2026-11-28 12:00:00"))), for: clockApp, now: now)
        _ = try scheduler.schedule(request("a", .at(utc("2026-11-28 12:00:00"))), for: mailApp, now: now)
        #expect(scheduler.pendingCount(of: clockApp) == 3)
        #expect(AlertConfiguration().pendingLimit == 64)
    }

    @Test func theSameIdReplacesTheRequestWhole() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let now = reading("2026-11-26 12:00:00")
        _ = try scheduler.schedule(request("a", .at(utc("2026-11-26 13:00:00")), title: "first"), for: clockApp, now: now)
        _ = try scheduler.schedule(request("a", .after(.seconds(7200), repeats: false), title: "second"), for: clockApp, now: now)
        #expect(scheduler.pending(of: clockApp, now: now).map(\.next) == [utc("2026-11-26 14:00:00")])
        #expect(scheduler.fired(now: reading("2026-11-26 13:00:00")).presented.isEmpty)
        let fired = scheduler.fired(now: now.advanced(by: .seconds(7200)))
        #expect(fired.presented.map(\.content.title) == ["second"])
    }

    @Test func cancelByIdsAndAll() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let now = reading("2026-11-26 12:00:00")
        for id in ["a", "b", "c"] {
            _ = try scheduler.schedule(request(id, .at(utc("2026-11-27 12:00:00"))), for: clockApp, now: now)
        }
        _ = try scheduler.schedule(request("m", .at(utc("2026-11-27 12:00:00"))), for: mailApp, now: now)
        let cancelled = scheduler.cancel(["b", "nope"], of: clockApp, now: now)
        #expect(cancelled.forgotten == [AlertKey(app: clockApp, id: "b")])
        #expect(scheduler.pending(of: clockApp, now: now).map(\.request.id) == ["a", "c"])
        #expect(scheduler.cancelAll(of: clockApp, now: now).forgotten.count == 2)
        #expect(scheduler.records.map(\.key) == [AlertKey(app: mailApp, id: "m")])
    }

    @Test func aRestartKeepsIntervalsOnTheWallClockAndCatchesUp() throws {
        var scheduler = AlertScheduler(localZone: .utc)
        let before = reading("2026-11-26 12:00:00", boot: 5_000)
        _ = try scheduler.schedule(request("egg", .after(.seconds(7200), repeats: false)), for: clockApp, now: before)
        let daily = AlertTrigger.calendar(CalendarComponents(hour: 13), zone: .floating, repeats: true)
        _ = try scheduler.schedule(request("daily", daily), for: clockApp, now: before)
        // The machine rebooted: an hour and a half later, the boot-time clock starts again near zero.
        var restarted = AlertScheduler(localZone: .utc)
        let after = reading("2026-11-26 13:30:00", boot: 30)
        let actions = restarted.started(restoring: scheduler.records, now: after)
        #expect(actions.presented.map(\.id) == ["daily"])
        #expect(actions.presented.first?.late == true)
        #expect(actions.armed?.boot == BootTime(nanoseconds: (30 + 1800) * 1_000_000_000))
        #expect(actions.armed?.wall == utc("2026-11-27 13:00:00"))
    }

    @Test func tooManyMissedFiresAreSkippedAndSaidSo() throws {
        var scheduler = AlertScheduler(configuration: AlertConfiguration(maximumFiresHandled: 10), localZone: .utc)
        let minutely = AlertTrigger.calendar(CalendarComponents(second: 0), zone: .floating, repeats: true)
        _ = try scheduler.schedule(request("m", minutely, late: .deliver), for: clockApp, now: reading("2026-11-26 12:00:30"))
        let actions = scheduler.resumed(now: reading("2026-11-27 12:00:30"))
        #expect(actions.presented.count == 10)
        #expect(actions.drops.map(\.reason) == [.tooManyMissed(limit: 10, through: utc("2026-11-27 12:00:30"))])
        #expect(actions.armed?.wall == utc("2026-11-27 12:01:00"))
    }
}
