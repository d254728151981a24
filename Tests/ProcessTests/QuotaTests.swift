import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// `[Quotas]`: what one user's apps, and all apps, may take; refusals that name the quota; a restart that counts
/// what the store holds again. The tests run as root, whose apps have the administrators' quotas, and as nobody.
@Suite struct QuotaTests {
    static let mail = "org.example.mail"
    static let chat = "org.example.chat"

    /// Posts 4 KiB payloads to a queue kind until the daemon refuses one; returns how many it took.
    static func fill(_ client: VarlinkClient, _ app: String, upTo most: Int = 1000) throws -> (taken: Int, refusal: VarlinkError?) {
        let payload: JSONValue = ["text": .string(String(repeating: "x", count: 4096))]
        for taken in 0..<most {
            do {
                try post(client, app, "chat", payload, policy: ["policy": "queue", "bound": 10000])
            } catch let error as VarlinkError {
                return (taken, error)
            }
        }
        return (most, nil)
    }

    @Test func heldEventsStopAtTheUsersQuotaAndTheRefusalNamesIt() async throws {
        let daemon = try DaemonProcess(configuration: "[Quotas]\nAdminHeldBytes=64K\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            let (taken, refusal) = try Self.fill(client, Self.mail)
            #expect(refusal == VarlinkError(name: "io.coalesced.App.QuotaExceeded", parameters: ["quota": "AdminHeldBytes", "limit": 65536, "uid": 0]))
            // 4,108 bytes of JSON each, and 32 and one slot's 128 of bookkeeping: 15 fit in 64 KiB.
            #expect(taken == 15)
            let quotas = try client.call("io.coalesced.System.Stats")["stats"]?["quotas"]
            let used = try #require(quotas?["caller"]?["heldBytes"]?.intValue)
            #expect(used <= 65536 && used > 60000, "\(String(describing: quotas))")
            #expect(quotas?["heldBytes"]?.intValue == used)
            #expect(quotas?["caller"]?["heldBytesQuota"] == "AdminHeldBytes")
            // Smaller posts still fit where a 4 KiB one does not; a refused post held nothing.
            #expect(try post(client, Self.mail, "badge", ["n": 1]) == false)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.mail)])["held"]?.arrayValue
            #expect(held?.first { $0["kind"] == "chat" }?["count"] == 15)
        }
        daemon.signal(SIGKILL)
    }

    /// What the store holds counts again after a restart: the user is as full as before, and stays refused.
    @Test func aRestartCountsWhatTheStoreHolds() async throws {
        let configuration = "[Quotas]\nAdminHeldBytes=64K\n"
        let first = try DaemonProcess(configuration: configuration)
        try await onThread { try first.waitUntilReady() }
        let before = try await onThread { () throws -> Int64? in
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            #expect(try Self.fill(client, Self.mail).taken == 15)
            return try client.call("io.coalesced.System.Stats")["stats"]?["quotas"]?["caller"]?["heldBytes"]?.intValue
        }
        let second = try await onThread { try first.restartedWhenReady(configuration: configuration) }
        try await onThread {
            let client = try testClient(second.socketPath)
            let quotas = try client.call("io.coalesced.System.Stats")["stats"]?["quotas"]
            #expect(quotas?["caller"]?["heldBytes"]?.intValue == before)
            #expect(try Self.fill(client, Self.mail).taken == 0)
        }
        second.signal(SIGKILL)
    }

    /// The daemon's ceiling bounds every user together: one user's apps fill it, and the refusal names HeldBytes.
    @Test func theCeilingBoundsEveryUserTogether() async throws {
        let daemon = try DaemonProcess(configuration: "[Quotas]\nHeldBytes=64K\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            let (taken, refusal) = try Self.fill(client, Self.mail)
            #expect(taken == 15)
            #expect(refusal == VarlinkError(name: "io.coalesced.App.QuotaExceeded", parameters: ["quota": "HeldBytes", "limit": 65536]))
        }
        daemon.signal(SIGKILL)
    }

    /// One user cannot take every registration: past UserApps= its Register is refused, naming the quota, while
    /// root still registers.
    @Test func aUserRegistersNoMoreAppsThanItsQuota() async throws {
        let daemon = try DaemonProcess(configuration: "[Quotas]\nUserApps=2\n[Apps]\nMaxApps=5\n")
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let apps = try ["org.nobody.a", "org.nobody.b"].map {
                try ExampleApp(socket: daemon.socketPath, name: $0, asUser: "nobody", directory: daemon.directory)
            }
            for app in apps { #expect(try app.nextCallbacks(1) == ["didFinishLaunching"]) }
            let third = try ExampleApp(socket: daemon.socketPath, name: "org.nobody.c", asUser: "nobody", directory: daemon.directory)
            let refused = try third.waitForLine("refused")
            #expect(refused.contains("QuotaExceeded"), "\(refused)")
            #expect(refused.contains("UserApps"), "\(refused)")
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.mail)])
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 3)
            withExtendedLifetime(apps) {}
        }
        daemon.signal(SIGKILL)
    }
}
