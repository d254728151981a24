import ArgumentParser
import CoalesceCore

/// `coalesced-bench refresh-slots`: how many times the machine wakes for the background refreshes of many apps with
/// random windows, as ``RefreshPlan`` puts them into shared slots, against one wake per run (the same requests with
/// no window, each run at its own time) in the same run. Every run ends at once, done; conditions always hold: what is
/// counted is the plan's choice of times, not the daemon's speed.
struct RefreshSlotsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh-slots",
        abstract: "Wakes for many apps' periodic refreshes in shared slots, against one wake per run."
    )

    @Option(help: "Apps, each with one periodic refresh.")
    var apps = 100

    @Option(help: "Hours simulated.")
    var hours = 24

    @Option(help: "Shortest and longest period, in minutes (each app's drawn between them).")
    var periods: [Int] = [15, 60]

    @Option(help: "The window of each refresh, as a share of its period (0 to 1).")
    var flexShare = 0.25

    @Option(help: "Seeds, one simulation each.")
    var seeds: [UInt64] = [1, 2, 3]

    func run() throws {
        print("apps  hours  seed  runs  wakes (slots)  wakes (one per run)  runs per wake")
        for seed in self.seeds {
            var random = SplitMix(state: seed)
            let requests = (0..<self.apps).map { index -> (String, RefreshRequest) in
                let minutes = self.periods[0] + Int(random.next() % UInt64(max(1, self.periods[1] - self.periods[0] + 1)))
                let period = Double(minutes * 60)
                let request = RefreshRequest(
                    id: "sync", earliest: Double(random.next() % UInt64(period)), interval: .seconds(Int64(period)),
                    flex: .seconds(Int64(period * self.flexShare)), budget: .seconds(30)
                )
                return ("app\(index)", request)
            }
            let shared = Self.simulate(requests, hours: self.hours)
            let alone = Self.simulate(requests.map { ($0.0, Self.withoutWindow($0.1)) }, hours: self.hours)
            print(
                "\(self.apps)  \(self.hours)  \(seed)  \(shared.runs)  \(shared.wakes)  \(alone.wakes)  "
                    + "\((Double(shared.runs) / Double(max(1, shared.wakes)) * 10).rounded() / 10)"
            )
        }
    }

    static func withoutWindow(_ request: RefreshRequest) -> RefreshRequest {
        var request = request
        request.flex = .zero
        return request
    }

    /// Runs the plan from time 0 to `hours`, each run done at once; counts the runs and the distinct times at which
    /// any ran (each a wake of the machine).
    static func simulate(_ requests: [(String, RefreshRequest)], hours: Int) -> (runs: Int, wakes: Int) {
        var plan = RefreshPlan<String>()
        for (app, request) in requests { plan.schedule(request, for: app) }
        let end = Double(hours * 3600)
        var now = 0.0
        var runs = 0
        var wakes = 0
        var lastWake: Double?
        while now <= end {
            let slot = plan.due(now: now, conditions: SystemConditions())
            if !slot.runs.isEmpty {
                if lastWake != now { wakes += 1 }
                lastWake = now
                runs += slot.runs.count
                for key in slot.runs { plan.finished(key, .done, now: now) }
                continue
            }
            guard let next = slot.next, next > now else { break }
            now = next
        }
        return (runs, wakes)
    }
}

/// A small deterministic generator: the same seed draws the same windows.
struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
