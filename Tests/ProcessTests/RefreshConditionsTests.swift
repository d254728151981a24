import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// A background refresh that waits for its conditions, with the real daemon reading them from a bus: UPower and
/// NetworkManager are python-dbusmock templates on a private bus given to the daemon as its system bus, since a real
/// battery and network manager cannot be had here. logind is not on that bus, so acPower and idle count as holding.
/// The example app, suspended and stopped, is woken into the background for each run and says it is done.
@Suite struct RefreshConditionsTests {
    static let mail = "org.example.mail"

    /// A dbusmock template on `bus`, as its system bus; waits for it to own `name`.
    static func mock(_ template: String, owning name: String, on bus: SessionBus, parameters: String = "{}") throws -> WatchedProcess {
        let process = try WatchedProcess(
            "/usr/bin/python3", ["-m", "dbusmock", "--template", template, "-p", parameters],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        )
        try waitUntil("the \(template) mock to own \(name)", poll: .milliseconds(50)) {
            if process.child.hasEnded { throw SupportError("the mock ended: \(process.output.joined(separator: "\n"))") }
            return try bus.hasOwner(name)
        }
        return process
    }

    static func refreshes(_ system: VarlinkClient) throws -> [JSONValue] {
        try system.call("io.coalesced.App.ListRefreshes", ["app": .string(Self.mail)])["refreshes"]?.arrayValue ?? []
    }

    @Test func aRefreshWaitsForBatteryAndNetworkAsUPowerAndNetworkManagerSayAndRunsAsTheyHold() async throws {
        try await onThread {
            let bus = try SessionBus()
            defer { bus.stop() }
            let upower = try Self.mock("upower", owning: "org.freedesktop.UPower", on: bus, parameters: #"{"OnBattery": true}"#)
            let network = try Self.mock("networkmanager", owning: "org.freedesktop.NetworkManager", on: bus)
            defer {
                upower.child.signal(SIGKILL)
                network.child.signal(SIGKILL)
            }
            let daemon = try DaemonProcess(
                configuration: SuspensionTests.configuration, environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
            )
            defer { daemon.signal(SIGKILL) }
            try daemon.waitUntilReady()
            let system = try testClient(daemon.socketPath)
            _ = try system.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            let mail = try ExampleApp(socket: daemon.socketPath, name: Self.mail)
            defer { mail.kill() }
            _ = try mail.nextCallbacks(3)
            try SuspensionTests.sendHome(mail, system)
            try SuspensionTests.waitForState(mail, stopped: true)

            // On battery: the daemon has read it, and the refresh waits for it.
            try waitUntil("the daemon to read UPower") {
                try system.call("io.coalesced.System.Stats")["stats"]?["system"]?["refreshConditions"]?["notOnBattery"] == false
            }
            let scheduled = try system.call("io.coalesced.App.ScheduleRefresh", [
                "app": .string(Self.mail), "id": "sync", "flexSec": 0, "requires": ["notOnBattery", "network"], "budgetSec": 5,
            ])
            #expect(scheduled["refresh"]?["waitingFor"] == ["notOnBattery"])
            let explained = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "explain", Self.mail])
            #expect(explained.stdout.contains("Its refresh sync is due now and waits for notOnBattery to hold."), "\(explained.stdout)")
            #expect(try appInfo(system, Self.mail)["state"] == "suspended")

            // On mains: woken into the background for it, it says it is done, and is suspended again.
            try bus.gdbus([
                "call", "--dest", "org.freedesktop.UPower", "--object-path", "/org/freedesktop/UPower", "--method",
                "org.freedesktop.DBus.Properties.Set", "org.freedesktop.UPower", "OnBattery", "<false>",
            ])
            _ = try mail.waitForLine("backgroundRefresh id=sync budget=5")
            _ = try mail.waitForLine("refresh-done id=sync")
            #expect(!mail.output.contains { $0.hasPrefix("callback willEnterForeground") }, "woken into the background only")
            #expect(daemon.output.contains("\(Self.mail): suspended → background (refresh)"), "\(daemon.output.suffix(2000))")
            try waitUntil("the one-time refresh to be done and gone") { try Self.refreshes(system).isEmpty }
            try waitForApp(system, Self.mail, "state", "suspended")

            // Offline (NetworkManager's connectivity none), then online again.
            try bus.gdbus([
                "call", "--dest", "org.freedesktop.NetworkManager", "--object-path", "/org/freedesktop/NetworkManager", "--method",
                "org.freedesktop.DBus.Mock.SetConnectivity", "1",
            ])
            try waitUntil("the daemon to read NetworkManager") {
                try system.call("io.coalesced.System.Stats")["stats"]?["system"]?["refreshConditions"]?["network"] == false
            }
            _ = try system.call("io.coalesced.App.ScheduleRefresh", [
                "app": .string(Self.mail), "id": "fetch", "flexSec": 0, "requires": ["network"], "budgetSec": 5,
            ])
            #expect(try Self.refreshes(system).first?["waitingFor"] == ["network"])
            let listed = try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "refreshes", Self.mail])
            #expect(listed.stdout.contains("fetch") && listed.stdout.contains("network"), "\(listed.stdout)")
            try bus.gdbus([
                "call", "--dest", "org.freedesktop.NetworkManager", "--object-path", "/org/freedesktop/NetworkManager", "--method",
                "org.freedesktop.DBus.Mock.SetConnectivity", "4",
            ])
            _ = try mail.waitForLine("backgroundRefresh id=fetch budget=5")
            try waitUntil("the refresh to be done and gone") { try Self.refreshes(system).isEmpty }
        }
    }
}
