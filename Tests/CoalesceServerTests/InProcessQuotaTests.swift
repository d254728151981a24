@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Testing
import Varlink

/// `[Quotas]` on the manager in process: what one user's apps, and all apps, may take; refusals that name the quota
/// (as the poster hears them on the wire: the error's name and parameters); a restart that counts what the store
/// holds again. The caller's uid is the peer's, given to each call: root, whose apps have the administrators' quotas,
/// and nobody.
@Suite struct InProcessQuotaTests {
    static let mail = "org.example.mail"
    static let nobody: UInt32 = 65534

    /// Posts 4 KiB payloads to a queue kind until the manager refuses one; returns how many it took, and the refusal
    /// as the poster hears it.
    static func fill(_ fixture: ManagerFixture, _ app: String, upTo most: Int = 1000) async throws -> (taken: Int, refusal: VarlinkError?) {
        let payload: JSONValue = ["text": .string(String(repeating: "x", count: 4096))]
        for taken in 0..<most {
            do {
                try await fixture.post(app, "chat", payload, policy: .queue(bound: 10000))
            } catch let error as AppError {
                return (taken, VarlinkError(name: error.varlinkName, parameters: error.varlinkParameters))
            }
        }
        return (most, nil)
    }

    @Test func heldEventsStopAtTheUsersQuotaAndTheRefusalNamesIt() async throws {
        try await withManager(configuration: try configuration("[Quotas]\nAdminHeldBytes=64K\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let (taken, refusal) = try await Self.fill(fixture, Self.mail)
            #expect(
                refusal
                    == VarlinkError(
                        name: "io.coalesced.App.QuotaExceeded", parameters: ["quota": "AdminHeldBytes", "limit": 65536, "uid": 0]
                    )
            )
            // 4,108 bytes of JSON each, and 32 and one slot's 128 of bookkeeping: 15 fit in 64 KiB.
            #expect(taken == 15)
            let usage = fixture.manager.quotaUsage(of: 0)
            #expect(usage.bytes <= 65536 && usage.bytes > 60000, "\(usage)")
            #expect(usage.held == usage.bytes)
            #expect(usage.userHeld.name == "AdminHeldBytes")
            // Smaller posts still fit where a 4 KiB one does not; a refused post held nothing.
            #expect(try await fixture.post(Self.mail, "badge", ["n": 1]) == false)
            let held = try fixture.manager.queue(of: Self.mail).held
            #expect(held.first { $0.kind.value == "chat" }?.slot.count == 15)
        }
    }

    /// What the store holds counts again after a restart: the user is as full as before, and stays refused.
    @Test func aRestartCountsWhatTheStoreHolds() async throws {
        let configuration = try configuration("[Quotas]\nAdminHeldBytes=64K\n")
        let directory = try TemporaryDirectory()
        let before = try await withManager(configuration: configuration, directory: directory) {
            (fixture: ManagerFixture) async throws -> Int in
            try await fixture.register(Self.mail)
            #expect(try await Self.fill(fixture, Self.mail).taken == 15)
            return fixture.manager.quotaUsage(of: 0).bytes
        }
        // A restart: a new manager on the same state directory.
        try await withManager(configuration: configuration, directory: directory) { (fixture: ManagerFixture) async throws in
            #expect(fixture.manager.quotaUsage(of: 0).bytes == before)
            #expect(try await Self.fill(fixture, Self.mail).taken == 0)
        }
    }

    /// The daemon's ceiling bounds every user together: one user's apps fill it, and the refusal names HeldBytes.
    @Test func theCeilingBoundsEveryUserTogether() async throws {
        try await withManager(configuration: try configuration("[Quotas]\nHeldBytes=64K\n")) {
            (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let (taken, refusal) = try await Self.fill(fixture, Self.mail)
            #expect(taken == 15)
            #expect(
                refusal
                    == VarlinkError(name: "io.coalesced.App.QuotaExceeded", parameters: ["quota": "HeldBytes", "limit": 65536])
            )
        }
    }

    /// One user cannot take every registration: past UserApps= its Register is refused, naming the quota, while
    /// root still registers.
    @Test func aUserRegistersNoMoreAppsThanItsQuota() async throws {
        try await withManager(configuration: try configuration("[Quotas]\nUserApps=2\n[Apps]\nMaxApps=5\n")) {
            (fixture: ManagerFixture) async throws in
            // As the example app run as nobody: it registers, then attaches and is launched.
            for name in ["org.nobody.a", "org.nobody.b"] {
                try await fixture.register(name, uid: Self.nobody)
                let app = try await fixture.attach(name, uid: Self.nobody)
                #expect(try await app.sent().callbacks.first == "willFinishLaunching")
            }
            await #expect {
                try await fixture.register("org.nobody.c", uid: Self.nobody)
            } throws: { error in
                guard let error = error as? AppError else { return false }
                return error.varlinkName == "io.coalesced.App.QuotaExceeded" && error.varlinkParameters["quota"] == "UserApps"
            }
            try await fixture.register(Self.mail)
            #expect(fixture.manager.count == 3)
        }
    }
}
