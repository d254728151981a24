import CoalesceCore
import PropertyBased
import Testing

/// The scheduler driven through random schedules, cancels, time passing, sleeps, clocks set forward and back,
/// time-zone changes and restarts from what the store kept. Whatever the order: each request's fires are numbered
/// 1, 2, 3… with none twice and none skipped, a wall-clock rule's dates only go up (a zoned rule's each the next
/// after the one before), each input's presentations come in date order, the store's records are the scheduler's,
/// and once time has passed with the clocks left alone nothing due is left pending.
@Suite struct AlertSchedulerPropertyTests {
    enum Step: Int, CaseIterable {
        case scheduleAt, scheduleAfter, scheduleHourly, scheduleDaily, cancel, advance, sleep, jumpForward, jumpBack
        case restart, moveZone
    }

    /// What one request (one scheduling of an id) has fired.
    struct Track {
        var request: AlertRequest
        var since: WallTime
        var numbers: [Int] = []
        var dates: [WallTime] = []
    }

    struct World {
        let berlin: ZoneRules
        let newYork: ZoneRules
        var scheduler: AlertScheduler
        var now = reading("2026-10-24 22:00:00", boot: 500)
        var store: [AlertKey: AlertRecord] = [:]
        var tracks: [AlertKey: Track] = [:]
        var problems: [String] = []
        var counter = 0

        init() throws {
            self.berlin = try ZoneFiles.rules("Europe/Berlin")
            self.newYork = try ZoneFiles.rules("America/New_York")
            self.scheduler = AlertScheduler(localZone: self.berlin)
        }

        mutating func run(_ step: Step, _ parameter: Int) {
            let app = parameter % 2 == 0 ? clockApp : mailApp
            let id = "r\(parameter % 3)"
            let policies: [LatePolicy] = [.deliver, .coalesce, .dropAfter(.seconds(3600))]
            let late = policies[parameter % 3]
            let thread = parameter % 4 < 2 ? "t" : nil
            switch step {
            case .scheduleAt:
                let date = self.now.wall.advanced(by: .seconds(Int64(parameter - 2) * 1200))
                self.schedule(AlertRequest(id: id, trigger: .at(date), content: AlertContent(title: id, threadID: thread), late: late), app)
            case .scheduleAfter:
                let trigger = AlertTrigger.after(.seconds(Int64(parameter + 1) * 600), repeats: parameter % 2 == 1)
                self.schedule(AlertRequest(id: id, trigger: trigger, content: AlertContent(title: id, threadID: thread), late: late), app)
            case .scheduleHourly:
                let zone: CalendarZone = parameter % 2 == 0 ? .zoned(self.berlin) : .floating
                let trigger = AlertTrigger.calendar(CalendarComponents(minute: parameter * 7), zone: zone, repeats: parameter != 7)
                self.schedule(AlertRequest(id: id, trigger: trigger, content: AlertContent(title: id, threadID: thread), late: late), app)
            case .scheduleDaily:
                let zone: CalendarZone = parameter % 2 == 0 ? .zoned(self.berlin) : .floating
                let trigger = AlertTrigger.calendar(CalendarComponents(hour: parameter * 3, minute: 30), zone: zone, repeats: true)
                self.schedule(AlertRequest(id: id, trigger: trigger, content: AlertContent(title: id, threadID: thread), late: late), app)
            case .cancel:
                self.tracks[AlertKey(app: app, id: id)] = nil
                self.apply(self.scheduler.cancel([id], of: app, now: self.now))
            case .advance:
                self.now = self.now.advanced(by: .seconds(Int64((parameter + 1) * (parameter + 1)) * 420))
                self.apply(self.scheduler.fired(now: self.now))
            case .sleep:
                self.now = self.now.advanced(by: .seconds(Int64(parameter + 1) * 7200))
                self.apply(self.scheduler.resumed(now: self.now))
            case .jumpForward, .jumpBack:
                let seconds = Int64(parameter + 1) * (step == .jumpForward ? 10_800 : -2_700)
                self.now.wall = self.now.wall.advanced(by: .seconds(seconds))
                for key in self.tracks.keys where self.tracks[key]!.numbers.isEmpty && self.now.wall < self.tracks[key]!.since {
                    self.tracks[key]!.since = self.now.wall
                }
                self.apply(self.scheduler.clockChanged(now: self.now))
            case .restart:
                self.now.boot = BootTime(nanoseconds: Int64(parameter) * 100_000_000_000)
                self.scheduler = AlertScheduler(localZone: self.scheduler.localZone)
                let records = self.store.keys.sorted().map { self.store[$0]! }
                self.apply(self.scheduler.started(restoring: records, now: self.now))
            case .moveZone:
                self.apply(self.scheduler.timeZoneChanged(to: parameter % 2 == 0 ? self.newYork : self.berlin, now: self.now))
            }
            let kept = Dictionary(uniqueKeysWithValues: self.scheduler.records.map { ($0.key, $0) })
            if kept != self.store { self.problems.append("the store's records differ from the scheduler's") }
        }

        mutating func schedule(_ request: AlertRequest, _ app: AppName) {
            let key = AlertKey(app: app, id: request.id)
            do {
                let actions = try self.scheduler.schedule(request, for: app, now: self.now)
                self.tracks[key] = Track(request: request, since: self.now.wall)
                self.apply(actions)
            } catch {
                self.problems.append("\(key) refused: \(error)")
            }
        }

        mutating func apply(_ actions: [AlertAction]) {
            var dates: [WallTime] = []
            var fires: [(key: AlertKey, fire: AlertFire)] = []
            for action in actions {
                switch action {
                case .keep(let record): self.store[record.key] = record
                case .forget(let key): self.store[key] = nil
                case .present(let presentation):
                    dates.append(presentation.date)
                    fires += presentation.fires.map { (AlertKey(app: presentation.app, id: $0.id), $0) }
                case .dropped(let drop):
                    fires += drop.fires.map { (drop.key, $0) }
                case .arm: break
                }
            }
            // One request's fires may be split between presentations and drops: taken in their order.
            for (key, fire) in fires.sorted(by: { ($0.key, $0.fire.number) < ($1.key, $1.fire.number) }) { self.record(key, fire) }
            if dates != dates.sorted() { self.problems.append("presentations out of date order: \(dates)") }
        }

        mutating func record(_ key: AlertKey, _ fire: AlertFire) {
            guard var track = self.tracks[key] else {
                self.problems.append("\(key) fired but is not scheduled")
                return
            }
            if fire.number != track.numbers.count + 1 {
                self.problems.append("\(key) fire \(fire.number) after \(track.numbers)")
            }
            if case .calendar(let components, let zone, _) = track.request.trigger {
                if let last = track.dates.last, fire.date <= last { self.problems.append("\(key) date \(fire.date) after \(last)") }
                if case .zoned(let rules) = zone {
                    let expected = components.next(after: track.dates.last ?? track.since, in: rules)
                    if fire.date != expected { self.problems.append("\(key) fired \(fire.date), expected \(String(describing: expected))") }
                }
            }
            track.numbers.append(fire.number)
            track.dates.append(fire.date)
            self.tracks[key] = track
        }

        /// Time passes with the clocks left alone, a day and past every date of a request that fires once:
        /// nothing due may stay pending.
        mutating func settle() {
            let once = [clockApp, mailApp].flatMap { self.scheduler.pending(of: $0, now: self.now) }
                .filter { !$0.request.trigger.repeats }.map(\.next)
            let target = max(self.now.wall.advanced(by: .seconds(86_400)), (once.max() ?? self.now.wall).advanced(by: .seconds(60)))
            self.now = self.now.advanced(by: self.now.wall.duration(to: target))
            self.apply(self.scheduler.fired(now: self.now))
            for app in [clockApp, mailApp] {
                for pending in self.scheduler.pending(of: app, now: self.now) where pending.next <= self.now.wall {
                    self.problems.append("\(app)/\(pending.request.id) still pending at \(pending.next)")
                }
            }
            for (key, track) in self.tracks where !track.request.trigger.repeats && track.numbers != [1] {
                self.problems.append("\(key) fired \(track.numbers), not once")
            }
        }
    }

    @Test func nothingFiresTwiceNothingDueIsLostFiresInDateOrder() async throws {
        _ = try World()
        await propertyCheck(count: 300, input: Gen.int(in: 0...(Step.allCases.count * 8 - 1)).array(of: 0...40)) { codes in
            var world = try! World()
            for code in codes { world.run(Step(rawValue: code / 8)!, code % 8) }
            world.settle()
            #expect(world.problems == [], "steps: \(codes.map { "\(Step(rawValue: $0 / 8)!)(\($0 % 8))" })")
        }
    }
}
