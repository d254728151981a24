import CoalesceTestSupport
import Foundation
import Varlink

/// Pressure to first purge: a suspended app (64 MiB resident) and a hog in a 32 MiB memory cgroup. The benchmark
/// holds a kernel trigger of its own with the daemon's critical level on `/proc/pressure/memory`: from the moment
/// it fires (the kernel's own measure of "the critical level is reached", the same event the daemon's trigger
/// gets) to the moment the app's process is gone, and from the hog's start to then, per round.
struct PressureBenchmark {
    var rounds: Int

    /// The daemon's `Critical=full 20ms 2s`, as the kernel takes it.
    static let critical = "full 20000 2000000"

    func run() throws {
        guard let cgroup = MemoryCgroup(name: "coalesced-bench-\(getpid())", limit: 32 << 20) else {
            print("Pressure: skipped (needs root and a memory cgroup controller)")
            print("")
            return
        }
        defer { cgroup.remove() }
        let daemon = try DaemonProcess(configuration: "[Memory]\nWarning=some 10ms 2s\nCritical=full 20ms 2s\n")
        try daemon.waitUntilReady()
        defer {
            daemon.signal(SIGTERM)
            _ = daemon.waitForExit()
        }
        let client = try VarlinkClient(path: daemon.socketPath)
        var reactions: [Double] = []
        var fromStart: [Double] = []
        for round in 0..<self.rounds {
            let name = "org.bench.pressure\(round)"
            let app = try ExampleApp(socket: daemon.socketPath, name: name, arguments: ["--ballast", "64"])
            func state() -> String? {
                (try? client.call("io.coalesced.System.GetApp", ["app": .string(name)]))?["app"]?["state"]?.stringValue
            }
            try waitUntil("\(name) to be active") { state() == "active" }
            _ = try client.call("io.coalesced.System.Deactivate", ["app": .string(name)])
            try waitUntil("\(name) to be suspended") { state() == "suspended" }
            let trigger = open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard trigger >= 0, Self.critical.withCString({ write(trigger, $0, strlen($0) + 1) }) > 0 else {
                throw SupportError("cannot make a trigger on /proc/pressure/memory: \(String(cString: strerror(errno)))")
            }
            defer { close(trigger) }
            let started = ContinuousClock.now
            let hog = try cgroup.hog(file: daemon.directory.file("hog.data"), seconds: 60)
            var descriptor = pollfd(fd: trigger, events: Int16(POLLPRI), revents: 0)
            guard poll(&descriptor, 1, 60_000) == 1 else { throw SupportError("no critical pressure within 60 s") }
            let fired = ContinuousClock.now
            guard app.child.wait(timeout: .seconds(60)) != nil else { throw SupportError("\(name) was not purged within 60 s") }
            let purged = ContinuousClock.now
            reactions.append((purged - fired).milliseconds)
            fromStart.append((purged - started).milliseconds)
            cgroup.killProcesses()
            _ = hog.wait(timeout: .seconds(10))
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return "median \(Int(sorted[sorted.count / 2])) ms, min \(Int(sorted.first!)) ms, max \(Int(sorted.last!)) ms"
        }
        print("| pressure to first purge (\(self.rounds) rounds; levels some 10ms 2s / full 20ms 2s, kernel triggers) | |")
        print("|---|---|")
        print("| critical trigger fired → purged app's process gone | \(summary(reactions)) |")
        print("| hog started → purged app's process gone | \(summary(fromStart)) |")
        print("")
    }
}
