/// Handling the fires due: which are missed, what each late policy makes of them, and the actions of an input.
extension AlertScheduler {
    /// One fire due, with what it needs once its request may be gone.
    struct DueFire {
        var key: AlertKey
        var request: AlertRequest
        var fire: AlertFire
        /// How long after its date it is handled.
        var lateness: Duration
    }

    /// Handles the fires due at `now` and returns the input's actions: the records that `changed` (or went) and
    /// those the fires change, then the presentations in date order, the drops, and the timers.
    mutating func finish(now: ClockReading, changed: Set<AlertKey>) -> [AlertAction] {
        var changed = changed
        var due: [DueFire] = []
        var drops: [AlertDrop] = []
        for key in self.takeDue(now: now) {
            var entry = self.entries[key]!
            var handled = 0
            var ended = false
            fires: while true {
                let date: WallTime
                let lateness: Duration
                switch entry.next {
                case .wall(let next):
                    guard next <= now.wall else { break fires }
                    date = next
                    lateness = next.duration(to: now.wall)
                case .boot(let next):
                    guard next <= now.boot else { break fires }
                    lateness = next.duration(to: now.boot)
                    date = now.wall.advanced(by: .zero - lateness)
                }
                if handled == self.configuration.maximumFiresHandled {
                    ended = !self.skipMissed(&entry, now: now)
                    drops.append(
                        AlertDrop(key: key, fires: [], reason: .tooManyMissed(limit: handled, through: now.wall))
                    )
                    break fires
                }
                entry.record.fires += 1
                entry.record.lastFire = date
                handled += 1
                due.append(
                    DueFire(
                        key: key, request: entry.record.request,
                        fire: AlertFire(id: key.id, number: entry.record.fires, date: date), lateness: lateness
                    )
                )
                guard let next = self.following(entry, now: now) else {
                    ended = true
                    break fires
                }
                entry.next = next
                if case .boot(let date) = next {
                    entry.record.intervalDue = now.wall.advanced(by: now.boot.duration(to: date))
                }
            }
            if handled > 0 || ended { changed.insert(key) }
            self.set(key, ended ? nil : entry, reindexing: true)
        }
        self.dropStaleTops()

        var actions: [AlertAction] = []
        for key in changed.sorted() {
            if let entry = self.entries[key] { actions.append(.keep(entry.record)) } else { actions.append(.forget(key)) }
        }
        let (presentations, dropped) = self.apply(due)
        actions += presentations.map(AlertAction.present)
        actions += (dropped + drops).map(AlertAction.dropped)
        let timers = self.timers
        actions.append(.arm(wall: timers.wall, boot: timers.boot))
        return actions
    }

    /// The date after the one just handled; `nil` when the request fires no more.
    private func following(_ entry: Entry, now: ClockReading) -> Next? {
        guard entry.record.request.trigger.repeats else { return nil }
        switch (entry.record.request.trigger, entry.next) {
        case (.after(let interval, _), .boot(let date)):
            return .boot(date.advanced(by: interval))
        default:
            return self.next(of: entry.record, now: now)
        }
    }

    /// Moves a request that missed too many fires past `now` without counting the rest; false when it fires no
    /// more.
    private func skipMissed(_ entry: inout Entry, now: ClockReading) -> Bool {
        switch (entry.record.request.trigger, entry.next) {
        case (.after(let interval, _), .boot(let date)):
            let behind = date.duration(to: now.boot).wholeNanoseconds
            let steps = behind / interval.wholeNanoseconds + 1
            entry.next = .boot(BootTime(nanoseconds: date.nanoseconds + steps * interval.wholeNanoseconds))
        default:
            entry.record.lastFire = now.wall
            guard let next = self.next(of: entry.record, now: now) else { return false }
            entry.next = next
        }
        if case .boot(let date) = entry.next { entry.record.intervalDue = now.wall.advanced(by: now.boot.duration(to: date)) }
        return true
    }

    /// What the late policies make of the fires due: presentations in date order, and drops.
    private func apply(_ due: [DueFire]) -> ([AlertPresentation], [AlertDrop]) {
        struct Thread: Hashable {
            var app: AppName
            var thread: String?
        }
        var presentations: [AlertPresentation] = []
        var coalesced: [Thread: [DueFire]] = [:]
        var dropped: [AlertKey: (fires: [AlertFire], grace: Duration)] = [:]
        func present(_ fires: [DueFire], late: Bool) {
            let latest = fires.max { ($0.fire.date, $0.key) < ($1.fire.date, $1.key) }!
            presentations.append(
                AlertPresentation(
                    app: latest.key.app, id: latest.key.id, content: latest.request.content, style: latest.request.style,
                    fires: fires.map(\.fire).sorted { ($0.date, $0.id, $0.number) < ($1.date, $1.id, $1.number) },
                    late: late
                )
            )
        }
        for fire in due {
            guard fire.lateness > self.configuration.lateAfter else {
                present([fire], late: false)
                continue
            }
            switch fire.request.late {
            case .deliver:
                present([fire], late: true)
            case .coalesce:
                coalesced[Thread(app: fire.key.app, thread: fire.request.content.threadID), default: []].append(fire)
            case .dropAfter(let grace):
                if fire.lateness > grace {
                    dropped[fire.key, default: ([], grace)].fires.append(fire.fire)
                } else {
                    present([fire], late: true)
                }
            }
        }
        for fires in coalesced.values { present(fires, late: true) }
        presentations.sort { ($0.date, $0.app, $0.id) < ($1.date, $1.app, $1.id) }
        let drops = dropped.keys.sorted().map { key in
            AlertDrop(key: key, fires: dropped[key]!.fires, reason: .pastGrace(dropped[key]!.grace))
        }
        return (presentations, drops)
    }
}
