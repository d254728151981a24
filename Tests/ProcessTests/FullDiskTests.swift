import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// A full disk: the state directory is a small tmpfs, mounted in a mount namespace of its own (a holder process
/// keeps it, so that the daemon can be killed and started again on it), and filled up from outside.
@Suite struct FullDiskTests {
    static let app = "org.test.disk"

    /// Holds a mount namespace with a 2 MiB tmpfs at `path`; the test reaches it through /proc/PID/root.
    final class SmallDisk: @unchecked Sendable {
        let holder: ChildProcess
        let path: String

        init(at path: String) throws {
            self.path = path
            let script = "mkdir -p \"$0\" && mount -t tmpfs -o size=2m,mode=0755 tmpfs \"$0\" && touch \"$0/.mounted\" && exec sleep 600"
            self.holder = try ChildProcess("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script, path])
            try waitUntil("the tmpfs to be mounted at \(path)", timeout: .seconds(5)) {
                FileManager.default.fileExists(atPath: self.inside(".mounted"))
            }
        }

        deinit {
            self.holder.signal(SIGKILL)
            _ = self.holder.wait()
        }

        /// A file on the tmpfs, as the test sees it.
        func inside(_ name: String) -> String { "/proc/\(self.holder.pid)/root\(self.path)/\(name)" }

        /// Runs the daemon in the holder's mount namespace.
        var wrapper: [String] { ["/usr/bin/nsenter", "--target", "\(self.holder.pid)", "--mount", "--"] }

        /// Writes a file until the file system has no room left.
        func fill() {
            let descriptor = open(self.inside("filler"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            defer { close(descriptor) }
            let block = [UInt8](repeating: 0x55, count: 4096)
            while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        }

        func free() { unlink(self.inside("filler")) }
    }

    /// A daemon's temporary directory, socket and configuration, with its state directory on a ``SmallDisk``.
    struct OnSmallDisk {
        /// Started only for its temporary directory, socket and listener, and killed.
        let first: DaemonProcess
        let disk: SmallDisk

        init() throws {
            // ``generation(_:)`` attaches an app from this test's own process: no deadline may kill it.
            self.first = try DaemonProcess(configuration: noDeadlines)
            self.first.signal(SIGKILL)
            _ = self.first.waitForExit()
            self.disk = try SmallDisk(at: self.first.directory.file("state"))
        }

        var socket: String { self.first.socketPath }
        var arguments: [String] { ["--socket", self.first.socketPath, "--state-dir", self.disk.path, "--config", self.first.configPath] }

        /// Starts a daemon on the small disk.
        func daemon() throws -> DaemonProcess {
            try DaemonProcess(arguments: self.arguments, wrapper: self.disk.wrapper)
        }
    }

    /// Expects `error` to be StorageFailed saying the disk is full.
    static func expectDiskFull(_ error: VarlinkError, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(error.varlinkName == "io.coalesced.App.StorageFailed", "\(error)", sourceLocation: sourceLocation)
        #expect(
            error.varlinkParameters["reason"]?.stringValue?.contains("is full; free space there") == true, "\(error)",
            sourceLocation: sourceLocation
        )
    }

    /// Posts and tells whether the daemon accepted the post; a refusal must be StorageFailed saying the disk is full.
    func accepted(_ client: VarlinkClient, _ kind: String, _ payload: JSONValue = [:]) throws -> Bool {
        do {
            try post(client, Self.app, kind, payload)
            return true
        } catch let error as VarlinkError {
            Self.expectDiskFull(error)
            return false
        }
    }

    @Test func aFullDiskRefusesPostsClearlyAndLosesNoAcceptedOne() async throws {
        let setup = try await onThread { try OnSmallDisk() }
        let (first, disk) = (setup.first, setup.disk)
        let daemon = try setup.daemon()
        try await onThread { try daemon.waitUntilReady() }
        let (ticks, bulk) = try await onThread { () -> (Int, Int) in
            let client = try testClient(first.socketPath)
            _ = try client.call(
                "io.coalesced.App.Register",
                ["name": .string(Self.app), "kinds": ["tick": ["policy": "count"], "bulk": ["policy": "queue", "bound": 1000]]]
            )
            var ticks = 0
            for _ in 0..<5 where try self.accepted(client, "tick", [:]) { ticks += 1 }
            #expect(ticks == 5)

            var bulk = 0
            let big = JSONValue.object(["data": .string(String(repeating: "x", count: 16 << 10))])
            for _ in 0..<3 where try self.accepted(client, "bulk", big) { bulk += 1 }
            #expect(bulk == 3)
            disk.fill()
            // A queue kind's stored row grows with every post: the disk runs out soon.
            var refused = false
            for _ in 0..<200 {
                if try self.accepted(client, "bulk", big) { bulk += 1 } else { refused = true; break }
            }
            #expect(refused, "a post was refused once the disk was full")
            var refusedTicks = 0
            for _ in 0..<20 {
                if try self.accepted(client, "tick", [:]) { ticks += 1 } else { refusedTicks += 1 }
            }
            print("full disk: \(bulk) bulk posts accepted before the first refusal; then \(refusedTicks) of 20 ticks refused")
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 1, "the daemon keeps serving")
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.app)])["held"]?.arrayValue ?? []
            #expect(held.first { $0["kind"] == "tick" }?["count"]?.intValue == Int64(ticks), "memory holds exactly what was accepted")

            disk.free()
            #expect(try self.accepted(client, "tick", [:]), "posts are accepted again once there is room")
            ticks += 1
            return (ticks, bulk)
        }

        // What is on disk is what was accepted: nothing refused crept in with a later write.
        #expect(daemon.output.contains("is full; free space there"), "the daemon's log says the disk is full")
        daemon.signal(SIGKILL)
        _ = try await onThread { daemon.waitForExit() }
        let restarted = try setup.daemon()
        try await onThread { try restarted.waitUntilReady() }
        try await onThread {
            let client = try testClient(first.socketPath)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.app)])["held"]?.arrayValue ?? []
            #expect(held.first { $0["kind"] == "tick" }?["count"]?.intValue == Int64(ticks))
            #expect(held.first { $0["kind"] == "bulk" }?["count"]?.intValue == Int64(bulk))
            // And the app, once it runs, receives exactly that, even when it starts while the disk is full: its
            // wake cannot store the deliveries then, so nothing is sent until a retry can.
            disk.fill()
            let big = JSONValue.object(["data": .string(String(repeating: "y", count: 16 << 10))])
            for _ in 0..<50 where try self.accepted(client, "filler", big) {}  // whatever room the store had left
            let app = try ExampleApp(socket: first.socketPath, name: Self.app)
            #expect(try app.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            try waitUntil("the store to refuse the wake's delivery") { restarted.output.contains("could not deliver what it held") }
            let early = app.eventSequences.count
            let refused = restarted.output.contains("could not deliver what it held")
            print("full disk: the wake's delivery was \(refused ? "refused, then retried" : "stored at once"); \(early) events before room was made")
            #expect(refused, "the store refused the wake's delivery (the disk was filled, and the store's room used up)")
            #expect(early == 0, "nothing is sent while what the app held cannot be stored")
            disk.free()
            let events = try app.events(atLeast: 1 + bulk).filter { !$0.hasPrefix("event filler ") }
            #expect(events.first == "event tick count=\(ticks) payload=-")
            #expect(events.dropFirst().count == bulk && events.dropFirst().allSatisfy { $0.hasPrefix("event bulk count=1 ") })
        }
        restarted.signal(SIGKILL)
    }

    /// The generation `socket`'s daemon numbers its callbacks in: ``counted`` attaches from this process (a launch),
    /// and its first callback's sequence number says. Its stream ends when the returned client goes.
    /// - Throws: the attach's refusal, as ``VarlinkError``.
    func generation(_ socket: String) throws -> (generation: Int64, stream: VarlinkClient) {
        let stream = try testClient(socket)
        try stream.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(Self.counted)], more: true))
        for _ in 0..<2 {
            let reply = try stream.receiveReply()
            if let error = reply.error { throw VarlinkError(name: error, parameters: reply.parameters) }
            if let seq = reply.parameters["callback"]?["seq"]?.intValue { return (seq >> 32, stream) }
        }
        throw SupportError("\(Self.counted) was not launched by its attach")
    }

    /// An app attached only to read the generation its callbacks are numbered in.
    static let counted = "org.test.counted"

    /// A daemon started on a full disk comes up, says so in one line, serves what the store holds and refuses every
    /// write with the error a full disk gives while it runs; once there is room it writes again, with no restart,
    /// and what it writes survives one. Its sequence numbers go out only once its generation is on disk, so that
    /// each start's numbers exceed the one's before.
    @Test func aDaemonStartedOnAFullDiskServesReadsAndWritesOnceThereIsRoom() async throws {
        let setup = try await onThread { try OnSmallDisk() }
        let daemon = try setup.daemon()
        try await onThread { try daemon.waitUntilReady() }
        let before = try await onThread { () throws -> Int64 in
            let client = try testClient(setup.socket)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app), "kinds": ["tick": ["policy": "count"]]])
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.counted)])
            for _ in 0..<3 { #expect(try self.accepted(client, "tick")) }
            let generation = try self.generation(setup.socket).generation  // its stream ends here
            try waitForApp(client, Self.counted, "state", "notRunning")
            return generation
        }
        daemon.signal(SIGTERM)
        #expect(try await onThread { daemon.waitForExit() } == 0)

        setup.disk.fill()
        let full = try setup.daemon()
        try await onThread { try full.waitUntilReady() }
        let warnings = full.output.split(separator: "\n").filter { $0.contains("is full") }
        #expect(warnings.count == 1, "one line says the disk is full: \(full.output)")
        #expect(warnings.first?.contains("The file system holding \(setup.disk.path) is full") == true, "\(warnings)")
        #expect(warnings.first?.contains("free space there") == true, "\(warnings)")
        try await onThread {
            let client = try testClient(setup.socket)
            let stats = try client.call("io.coalesced.System.Stats")["stats"]
            #expect(stats?["apps"] == 2, "reads are served")
            #expect(stats?["storeWritable"] == false)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.app)])["held"]?.arrayValue ?? []
            #expect(held.first { $0["kind"] == "tick" }?["count"] == 3)
            #expect(!(try self.accepted(client, "tick")), "a post is refused")
            #expect(throws: VarlinkError.self, "a registration is refused") {
                do {
                    _ = try client.call("io.coalesced.App.Register", ["name": "org.test.later"])
                } catch let error as VarlinkError {
                    Self.expectDiskFull(error)
                    throw error
                }
            }
            #expect(throws: VarlinkError.self, "an app cannot attach before the start's generation is written") {
                do {
                    _ = try self.generation(setup.socket)
                } catch let error as VarlinkError {
                    Self.expectDiskFull(error)
                    throw error
                }
            }
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 2, "the daemon serves on")

            setup.disk.free()
            #expect(try self.accepted(client, "tick"), "a post is accepted once there is room, with no restart")
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["storeWritable"] == true)
        }
        let during = try await onThread { () throws -> Int64 in
            let generation = try self.generation(setup.socket).generation
            // Not running again, and on disk so, so that the next start launches it rather than wait for it.
            let client = try testClient(setup.socket)
            try waitForApp(client, Self.counted, "state", "notRunning")
            try commitUnhurriedWrites(client)
            return generation
        }
        #expect(during > before, "numbered past the start before")
        #expect(!full.output.contains("Cannot write events to the store"), "the refusals added no line: \(full.output)")

        // Killed: what was accepted is on disk, and the start's own writes were made before it.
        let restarted = try await onThread { () throws -> DaemonProcess in
            full.signal(SIGKILL)
            _ = full.waitForExit()
            let restarted = try setup.daemon()
            try restarted.waitUntilReady()
            return restarted
        }
        try await onThread {
            let client = try testClient(setup.socket)
            let held = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.app)])["held"]?.arrayValue ?? []
            #expect(held.first { $0["kind"] == "tick" }?["count"] == 4, "the post accepted after the room came survives")
            #expect(try self.generation(setup.socket).generation > during, "the start on the full disk was counted")
        }
        restarted.signal(SIGKILL)
    }

    /// A store that was never made cannot be made on a full disk: the daemon stops with the line that says so, not
    /// with advice to move the store aside.
    @Test func aNewStoreOnAFullDiskSaysSo() async throws {
        let setup = try await onThread { try OnSmallDisk() }
        setup.disk.fill()
        let full = try setup.daemon()
        #expect(try await onThread { full.waitForExit() } == 1, "\(full.output)")
        #expect(full.output.contains("is full; free space there"), "\(full.output)")
        #expect(!full.output.contains("move it aside"), "\(full.output)")
        setup.disk.free()
        let restarted = try setup.daemon()
        try await onThread { try restarted.waitUntilReady() }
        restarted.signal(SIGKILL)
    }

    @Test func aFullDiskRefusesNotificationRequestsAndKeepsWhatItAccepted() async throws {
        let setup = try await onThread { try OnSmallDisk() }
        let (first, disk) = (setup.first, setup.disk)
        let daemon = try setup.daemon()
        try await onThread { try daemon.waitUntilReady() }
        @Sendable func pending(_ client: VarlinkClient) throws -> [String] {
            (try client.call("io.coalesced.Notifications.ListPending", ["app": .string(Self.app)])["pending"]?.arrayValue ?? [])
                .compactMap { $0["request"]?["id"]?.stringValue }.sorted()
        }
        @Sendable func held(_ client: VarlinkClient) throws -> Int64 {
            try client.call("io.coalesced.System.Stats")["stats"]?["quotas"]?["caller"]?["heldBytes"]?.intValue ?? -1
        }
        let accepted = try await onThread { () throws -> [String] in
            let client = try testClient(first.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            let body = JSONValue.string(String(repeating: "n", count: 3000))
            var accepted: [String] = []
            func schedule(_ id: String) throws -> Bool {
                do {
                    _ = try client.call(
                        "io.coalesced.Notifications.Schedule",
                        ["app": .string(Self.app), "request": ["id": .string(id), "trigger": ["calendar": ["hour": 8]], "content": ["title": "t", "body": body]]]
                    )
                    accepted.append(id)
                    return true
                } catch let error as VarlinkError {
                    #expect(error.varlinkName == "io.coalesced.Notifications.StorageFailed", "\(error)")
                    #expect(error.varlinkParameters["reason"]?.stringValue?.contains("is full") == true, "\(error)")
                    return false
                }
            }
            for index in 0..<3 { #expect(try schedule("before\(index)")) }
            disk.fill()
            var refused = false
            for index in 0..<50 where !refused { refused = !(try schedule("full\(index)")) }
            #expect(refused, "a Schedule was refused once the disk was full")
            // What the daemon holds is what the store took, once it has read the store back after the refusal.
            try waitUntil("the daemon to hold what was accepted") { try pending(client) == accepted.sorted() }
            let charged = try held(client)
            disk.free()
            #expect(try schedule("after"), "requests are accepted again once there is room")
            #expect(try held(client) > charged, "and charged")
            return accepted
        }
        daemon.signal(SIGKILL)
        _ = try await onThread { daemon.waitForExit() }
        let restarted = try setup.daemon()
        try await onThread { try restarted.waitUntilReady() }
        try await onThread { () throws in
            #expect(try pending(try testClient(first.socketPath)) == accepted.sorted(), "on disk: every accepted request, no refused one")
        }
        restarted.signal(SIGKILL)
    }
}
