import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Real memory pressure: a hog in a memory cgroup of its own, limited to 32 MiB, reading a 128 MiB file over and
/// over, stalls in reclaim, which the machine's PSI counts (`/proc/pressure/memory` counts a memory cgroup's reclaim
/// too). The daemon, with low levels, gets its kernel triggers fired: the running app is told
/// didReceiveMemoryWarning, the suspended apps are purged the largest first, and the daemon serves on.
@Suite(.serialized) struct MemoryPressureTests {
    static let small = "org.example.small"
    static let large = "org.example.large"
    static let medium = "org.example.medium"
    static let active = "org.example.active"

    @Test func pressureWarnsRunningAppsAndPurgesSuspendedOnesLargestFirst() async throws {
        // Low levels, in 2 s windows: the kernel makes those triggers without CAP_SYS_RESOURCE too.
        try await self.underPressure(
            configuration: "[Memory]\nWarning=some 10ms 2s\nCritical=full 20ms 2s\n",
            mode: "triggers",
            logged: "Memory pressure: kernel triggers on /proc/pressure/memory"
        )
    }

    /// A daemon without CAP_SYS_RESOURCE cannot make triggers with 1 s windows: it says so, reads the file every
    /// half second instead, and warns and purges all the same.
    @Test func withoutTriggersTheFileIsReadPeriodically() async throws {
        try await self.underPressure(
            configuration: "[Memory]\nWarning=some 10ms 1s\nCritical=full 20ms 1s\n",
            wrapper: ["/usr/bin/setpriv", "--bounding-set=-sys_resource", "--"],
            mode: "polling",
            logged: "Memory pressure: reading /proc/pressure/memory every 500ms (cannot make the trigger 'some 10000 1000000' on /proc/pressure/memory: Invalid argument; without CAP_SYS_RESOURCE a trigger's window must be a multiple of 2s)"
        )
    }

    /// Three suspended apps of different sizes and one active app under real memory pressure: the active one is
    /// warned, the suspended ones are purged, the largest first, and the daemon serves on, in `mode`.
    private func underPressure(configuration: String, wrapper: [String] = [], mode: String, logged: String) async throws {
        guard let cgroup = MemoryCgroup(name: "coalesced-pressure-test-\(getpid())", limit: 32 << 20) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("the memory pressure test needs root and a memory cgroup controller, and CI=true requires it to run")
            } else {
                print("⚠️  SKIPPING the memory pressure test: it needs root and a memory cgroup controller")
            }
            return
        }
        // Every step here waits on processes (the daemon, the apps, the hog): all of it on a thread of its own.
        try await onThread {
            defer { #expect(cgroup.remove(), "the cgroup \(cgroup.path) is removed") }
            let daemon = try DaemonProcess(configuration: configuration, wrapper: wrapper)
            try daemon.waitUntilReady()
            let socket = daemon.socketPath
            @Sendable func call(_ method: String, _ parameters: JSONObject = [:]) throws -> JSONObject {
                try testClient(socket).call("io.coalesced.System." + method, parameters)
            }
            @Sendable func state(_ name: String) throws -> String? {
                try call("GetApp", ["app": .string(name)])["app"]?["state"]?.stringValue
            }
            let before = try call("Stats")["stats"]?["memoryPressure"]
            #expect(before?["mode"] == .string(mode), "\(String(describing: before))")
            #expect(try String(contentsOfFile: daemon.logPath, encoding: .utf8).contains(logged), "\(daemon.output)")

            // Three apps of different sizes, each sent home and suspended in turn, and one active app.
            var apps: [String: ExampleApp] = [:]
            for (name, mebibytes) in [(Self.small, 8), (Self.large, 96), (Self.medium, 40)] {
                let app = try ExampleApp(socket: daemon.socketPath, name: name, arguments: ["--ballast", "\(mebibytes)"])
                apps[name] = app
                try waitUntil("\(name) to be active") { (try? state(name)) == "active" }
                _ = try call("Deactivate", ["app": .string(name)])
                try waitUntil("\(name) to be suspended") { try state(name) == "suspended" }
            }
            let running = try ExampleApp(socket: daemon.socketPath, name: Self.active)
            try waitUntil("\(Self.active) to be active") { (try? state(Self.active)) == "active" }

            // The hog: in the cgroup before it does anything, bounded in time should the test die first.
            let hog = try cgroup.hog(file: daemon.directory.file("hog.data"))
            defer {
                hog.signal(SIGKILL)
                _ = hog.wait(timeout: .seconds(10))
            }

            try waitUntil("every suspended app to be purged", timeout: .seconds(90), poll: .milliseconds(100)) {
                try [Self.small, Self.large, Self.medium].allSatisfy { try state($0) == "notRunning" }
            }
            for name in [Self.small, Self.large, Self.medium] {
                #expect(apps[name]!.child.wait(timeout: .seconds(10)) == 128 + SIGKILL, "\(name) purged without notice: SIGKILL")
            }
            _ = try running.waitForLine("callback didReceiveMemoryWarning", timeout: .seconds(30))
            #expect(try state(Self.active) == "active", "the running app is warned, never purged")

            let log = try String(contentsOfFile: daemon.logPath, encoding: .utf8).split(separator: "\n")
            let purges = log.filter { $0.contains("purged to reclaim memory under memory pressure") }
            #expect(purges.map { $0.split(separator: ":").dropFirst().first.map { $0.trimmingCharacters(in: .whitespaces) } }
                == [Self.large, Self.medium, Self.small], "the largest resident set first:\n\(purges.joined(separator: "\n"))")
            for purge in purges {
                #expect(purge.contains("pressure_full_avg10="), "the pressure figures: \(purge)")
                #expect(purge.contains("pressure_some_total="))
                #expect(purge.contains("resident_bytes="))
            }
            #expect(log.contains { $0.contains("Memory pressure is critical") })

            // The daemon serves on, and counts what it did.
            let after = try call("Stats")["stats"]?["memoryPressure"]
            #expect(after?["purges"] == 3)
            #expect((after?["warnings"]?.intValue ?? 0) >= 1)
            #expect(after?["mode"] == .string(mode))
        }
    }
}
