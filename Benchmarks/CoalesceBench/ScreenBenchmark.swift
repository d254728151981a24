import ArgumentParser
import CoalesceTestSupport
import Foundation
import Varlink

/// `coalesced-bench screen`: a focus change in the compositor to the app's `scene.didBecomeActive` on its stream,
/// beside the compositor's own event to the client (the floor) in the same run; or, with `--instructions`, the
/// daemon's instructions per focus change under callgrind, beside the same number of reports that change nothing.
/// Headless sway, the daemon and coalesce-screen-agent, one app with two windows (``FocusRig``).
struct ScreenBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screen",
        abstract: "Focus change in sway to the scene's didBecomeActive on the app's stream, beside sway's own event to the client.",
        discussion: """
            Needs root (sway runs as nobody through setpriv), sway, the Wayland test client's build (scripts/setup \
            --tests) and release builds of coalesced and coalesce-screen-agent; --instructions needs valgrind \
            (scripts/setup --bench).
            """
    )

    @Option(help: "Focus changes measured (default 1,000; 200 with --instructions).")
    var switches: Int?

    @Option(help: "Focus changes before the measured ones, not counted.")
    var warmUp = 50

    @Option(help: "The daemon's [Daemon] LogLevel=.")
    var logLevel = "info"

    @Flag(help: "Count the daemon's instructions per focus change with callgrind instead of timing.")
    var instructions = false

    @Option(help: "With --instructions: keep the focus changes' profile in this file (callgrind_annotate reads it).")
    var profile: String?

    /// The app acknowledges its callbacks every this many switches, as an app that reads its stream would.
    static let acknowledgeEvery = 100

    func validate() throws {
        guard getuid() == 0 else { throw ValidationError("screen needs root: sway runs as nobody through setpriv") }
        for tool in ["/usr/bin/sway", "/usr/bin/swaymsg", "/usr/bin/setpriv", "/usr/bin/wayland-scanner", "/usr/bin/cc"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw ValidationError("no \(tool): screen needs sway and the Wayland client's build (scripts/setup --tests)")
        }
        guard (self.switches ?? 1) > 0, self.warmUp >= 0 else { throw ValidationError("--switches must be positive, --warm-up not negative") }
    }

    private var daemonConfiguration: String {
        // The app is the benchmark's client, which acknowledges only every so often: no deadline may kill it.
        "[Daemon]\nLogLevel=\(self.logLevel)\n[Apps]\nAcknowledgeTimeoutSec=1h\n"
    }

    func run() throws {
        print("coalesced-bench screen: \(BuildProducts.path(of: "coalesced"))")
        print("")
        if self.instructions {
            try self.countInstructions(switches: self.switches ?? 200)
        } else {
            try self.time(switches: self.switches ?? 1000)
        }
    }

    private func time(switches: Int) throws {
        let daemon = try DaemonProcess(configuration: self.daemonConfiguration)
        try daemon.waitUntilReady()
        let rig = try FocusRig(daemon: daemon, timeout: .seconds(5))
        for index in 0..<self.warmUp { _ = try self.step(rig, index) }

        let stats = try rig.stats()
        let callsBefore = stats["calls"]?.intValue ?? 0
        let transitionsBefore = stats["transitions"]?.intValue ?? 0
        let callbacksBefore = rig.callbacksRead
        let daemonCPU = EventsBenchmark.cpuMicroseconds(daemon.pid)
        let agentCPU = EventsBenchmark.cpuMicroseconds(rig.agent.child.pid)
        var times: [FocusTimes] = []
        for index in 0..<switches { times.append(try self.step(rig, index)) }
        let daemonPerSwitch = (EventsBenchmark.cpuMicroseconds(daemon.pid) - daemonCPU) / Double(switches)
        let agentPerSwitch = (EventsBenchmark.cpuMicroseconds(rig.agent.child.pid) - agentCPU) / Double(switches)
        let after = try rig.stats()
        // The benchmark's own calls in between: its Acks, and the second Stats (a call counts itself).
        let calls = (after["calls"]?.intValue ?? 0) - callsBefore - Int64(switches / Self.acknowledgeEvery) - 1
        let transitions = (after["transitions"]?.intValue ?? 0) - transitionsBefore
        let callbacks = rig.callbacksRead - callbacksBefore

        let floor = times.map { Double($0.activated) / 1000 }.sorted()
        let scene = times.map { Double($0.sceneActive) / 1000 }.sorted()
        let added = times.map { Double($0.sceneActive - $0.activated) / 1000 }.sorted()
        print("| focus change, \(switches) switches (after \(self.warmUp) not counted), LogLevel=\(self.logLevel) | p50 | p90 | p99 | max |")
        print("|---|---|---|---|---|")
        print(Self.row("floor: RUN_COMMAND sent → the client's activated configure", floor))
        print(Self.row("RUN_COMMAND sent → scene.didBecomeActive on the app's stream", scene))
        print(Self.row("per switch: activated configure → scene.didBecomeActive", added))
        print("")
        print("| per focus change | value |")
        print("|---|---|")
        print("| what the agent and the daemon add: difference of the p50s | \(Self.format(scene.percentile(0.5) - floor.percentile(0.5))) µs |")
        print("| ReportWindows calls per switch (Stats.calls, less the benchmark's) | \(Self.ratio(Int(calls), switches)) |")
        print("| callbacks per switch on the app's stream, its scenes' and its own | \(Self.ratio(callbacks, switches)) |")
        print("| app state transitions per switch (Stats.transitions) | \(Self.ratio(Int(transitions), switches)) |")
        print("| CPU per switch from /proc (10 ms ticks): daemon / agent | \(Self.format(daemonPerSwitch)) / \(Self.format(agentPerSwitch)) µs |")
        print("")
    }

    private func countInstructions(switches: Int) throws {
        let callgrind = try CallgrindDaemon(configuration: self.daemonConfiguration)
        try callgrind.daemon.waitUntilReady(timeout: .seconds(120))
        // Under callgrind the daemon runs tens of times slower: the agent's calls and each switch may take longer.
        let rig = try FocusRig(daemon: callgrind.daemon, agentArguments: ["--call-timeout", "30"], timeout: .seconds(60))
        for index in 0..<self.warmUp { _ = try self.step(rig, index) }
        try rig.acknowledge()

        try callgrind.zero()
        let start = ContinuousClock.now
        for index in 0..<switches { _ = try self.step(rig, index) }
        let switching = try callgrind.dump(keeping: self.profile)
        let elapsed = ContinuousClock.now - start

        // The same number of reports that change nothing: the windows as the agent last reported them, from the
        // same reporter (root, wayland). Each is decoded, matched and compared, and nothing follows.
        let windows = try rig.windowsAsReported()
        let matches = try rig.report(windows)["windows"]?.arrayValue ?? []
        guard matches.count == FocusRig.titles.count, matches.allSatisfy({ $0["app"]?.stringValue == FocusRig.app }) else {
            throw SupportError("the unchanged report did not find the app's two scenes: \(matches)")
        }
        try callgrind.zero()
        for _ in 0..<switches { _ = try rig.report(windows) }
        let reporting = try callgrind.dump()
        let stray = try rig.callbacks(within: .seconds(2))
        guard stray == 0 else { throw SupportError("the unchanged reports made \(stray) callbacks: not a baseline") }

        try callgrind.zero()
        Thread.sleep(forTimeInterval: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let idle = try callgrind.dump()

        let seconds = Self.format(elapsed.milliseconds / 1000)
        print("| the daemon's instructions (callgrind), LogLevel=\(self.logLevel), \(switches) of each after \(self.warmUp) focus changes | per one | total |")
        print("|---|---|---|")
        print("| focus change: the agent's ReportWindows and what follows, an Ack per \(Self.acknowledgeEvery) | \(switching / switches) | \(switching) |")
        print("| baseline: ReportWindows carrying the same windows unchanged | \(reporting / switches) | \(reporting) |")
        print("| baseline: idle for as long as the focus changes took (\(seconds) s), per focus change | \(idle / switches) | \(idle) |")
        print("| the focus change beyond a report | \((switching - reporting) / switches) | \(switching - reporting) |")
        print("")
    }

    /// One focus change; the app acknowledges its callbacks every ``acknowledgeEvery`` switches.
    private func step(_ rig: FocusRig, _ index: Int) throws -> FocusTimes {
        let times = try rig.switchFocus()
        if (index + 1) % Self.acknowledgeEvery == 0 { try rig.acknowledge() }
        return times
    }

    private static func row(_ name: String, _ sorted: [Double]) -> String {
        let figures = [0.5, 0.9, 0.99].map { Self.format(sorted.percentile($0)) } + [Self.format(sorted.last ?? 0)]
        return "| \(name) | " + figures.map { "\($0) µs" }.joined(separator: " | ") + " |"
    }

    private static func ratio(_ count: Int, _ switches: Int) -> String {
        String(format: "%.2f", Double(count) / Double(switches))
    }

    private static func format(_ value: Double) -> String {
        String(format: "%.1f", value)
    }
}
