import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The built daemon, as a service manager sees it through NOTIFY_SOCKET.
@Suite struct NotifyProtocolTests {
    @Test func readyOnceServingWithAStatusLine() async throws {
        let daemon = try DaemonProcess()
        let ready = try await onThread { daemon.notify.waitFor("READY=1") }
        let message = try #require(ready, "no READY=1; output: \(daemon.output)")
        // Before it, while the store was recovered, more time was asked for.
        #expect(daemon.notify.messages.first?.hasPrefix("EXTEND_TIMEOUT_USEC=90000000\nSTATUS=Recovering the store in ") == true)
        let status = message.split(separator: "\n").first { $0.hasPrefix("STATUS=") }
        #expect(status?.hasPrefix("STATUS=Serving \(daemon.socketPath)") == true)
        // READY=1 means the socket answers.
        let stats = try await onThread { try testClient(daemon.socketPath).call("io.coalesced.System.Stats") }
        #expect(stats["stats"]?["version"] != nil)
        daemon.signal(SIGTERM)
        #expect(try await onThread { daemon.waitForExit() } == 0)
    }

    @Test func statusFollowsTheConnections() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let status = try await onThread { () throws -> String? in
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.System.Stats")
            return daemon.notify.waitFor(timeout: .seconds(10)) { $0.hasPrefix("STATUS=") && $0.contains("1 connection,") }
        }
        #expect(status != nil, "no STATUS= naming the open connection; got \(daemon.notify.messages)")
        daemon.signal(SIGKILL)
    }

    @Test func watchdogPingsAtHalfTheInterval() async throws {
        // WATCHDOG_USEC=400ms asks for a ping at least every 400 ms; the daemon pings every 200 ms.
        let daemon = try DaemonProcess(environment: ["WATCHDOG_USEC": "400000"])
        try await onThread { try daemon.waitUntilReady() }
        let pings = try await onThread { () -> [ContinuousClock.Instant] in
            // What came before is queued in the listener; the interval is measured from now on.
            while daemon.notify.receive(timeout: .zero) != nil {}
            var times: [ContinuousClock.Instant] = []
            let end = ContinuousClock.now + .seconds(3)
            while ContinuousClock.now < end {
                if let message = daemon.notify.receive(timeout: end - ContinuousClock.now), message == "WATCHDOG=1" {
                    times.append(.now)
                }
            }
            return times
        }
        // About 15 in 3 s. Gaps are timed where the test reads them, so a busy machine can stretch one a little
        // past the 400 ms interval; a ping really missing for an interval and a half is a failure.
        #expect(pings.count >= 7 && pings.count <= 20, "\(pings.count) pings in 3 s")
        let gaps = zip(pings.dropFirst(), pings).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 < .milliseconds(600) }, "gaps: \(gaps)")
        daemon.signal(SIGKILL)
    }

    @Test func noWatchdogPingsWithoutWatchdogUsec() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let ping = try await onThread { daemon.notify.waitFor(timeout: .seconds(1)) { $0 == "WATCHDOG=1" } }
        #expect(ping == nil)
        daemon.signal(SIGKILL)
    }

    @Test func sighupReloadsAndABadReloadKeepsTheOldConfiguration() async throws {
        let daemon = try DaemonProcess(configuration: "[Varlink]\nMaxMessageSize=64K\n")
        try await onThread { try daemon.waitUntilReady() }
        // One connection across both reloads, and waits for the daemon between its calls: on a thread of its own.
        try await onThread {
            let client = try testClient(daemon.socketPath)
            func limit() throws -> Int64? { try client.call("io.coalesced.System.Stats")["stats"]?["limits"]?["maxMessageSize"]?.intValue }
            #expect(try limit() == 65536)

            try daemon.directory.write("coalesced.conf", "[Varlink]\nMaxMessageSize=128K\n")
            daemon.signal(SIGHUP)
            let reloading = daemon.notify.waitFor("RELOADING=1")
            let monotonic = reloading?.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") }
            #expect(monotonic.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) } != nil, "\(reloading ?? "no RELOADING=1")")
            #expect(daemon.notify.waitFor("READY=1") != nil)
            #expect(try limit() == 131072)

            try daemon.directory.write("coalesced.conf", "[Varlink]\nMaxMessageSize=128K\nBogus=1\n")
            daemon.signal(SIGHUP)
            #expect(daemon.notify.waitFor("RELOADING=1") != nil)
            let ready = daemon.notify.waitFor("READY=1")
            #expect(ready?.contains("STATUS=Reload failed") == true, "\(ready ?? "no READY=1")")
            let stats = try client.call("io.coalesced.System.Stats")["stats"]
            #expect(stats?["limits"]?["maxMessageSize"] == 131072)
            #expect(stats?["reloads"] == 1)
            #expect(stats?["failedReloads"] == 1)
            #expect(daemon.output.contains("coalesced.conf:3: unknown key 'Bogus' in [Varlink]"))
        }
        daemon.signal(SIGKILL)
    }

    @Test func sigtermSaysStoppingExitsZeroAndRemovesTheSocket() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.System.Stats")
            daemon.signal(SIGTERM)
            #expect(daemon.notify.waitFor("STOPPING=1") != nil)
            #expect(daemon.waitForExit() == 0)
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            #expect(client.waitForClose(timeout: .seconds(5)))
        }
    }

    @Test func badConfigurationAtStartIsFatalAndNamesFileAndLine() async throws {
        let daemon = try DaemonProcess(configuration: "[Varlink]\n\nMaxConnections=many\n")
        #expect(try await onThread { daemon.waitForExit() } == 78)
        #expect(daemon.output.contains("coalesced.conf:3: bad value 'many' for MaxConnections=: expected a whole number"))
        try await onThread { #expect(daemon.notify.receive(timeout: .zero) == nil, "a daemon that failed to start must not say READY=1") }
    }
}
