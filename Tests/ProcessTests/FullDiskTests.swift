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

    /// Posts and tells whether the daemon accepted the post; a refusal must be StorageFailed saying the disk is full.
    func accepted(_ client: VarlinkClient, _ kind: String, _ payload: JSONValue) throws -> Bool {
        do {
            try post(client, Self.app, kind, payload)
            return true
        } catch let error as VarlinkError {
            #expect(error.varlinkName == "io.coalesced.App.StorageFailed", "\(error)")
            #expect(error.varlinkParameters["reason"]?.stringValue?.contains("is full; free space there") == true, "\(error)")
            return false
        }
    }

    @Test func aFullDiskRefusesPostsClearlyAndLosesNoAcceptedOne() async throws {
        let first = try DaemonProcess()  // only for its temporary directory, socket and listener
        first.signal(SIGKILL)
        _ = first.waitForExit()
        let disk = try SmallDisk(at: first.directory.file("state"))
        let arguments = ["--socket", first.socketPath, "--state-dir", disk.path, "--config", first.configPath]
        let daemon = try DaemonProcess(arguments: arguments, wrapper: disk.wrapper)
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
        _ = daemon.waitForExit()
        let restarted = try DaemonProcess(arguments: arguments, wrapper: disk.wrapper)
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
            #expect(try app.nextCallbacks(2) == ["didFinishLaunching", "didBecomeActive"])
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

    /// A disk with no room at start-up stops the daemon with the line that says so, not with advice to move the store
    /// aside; once there is room it starts with everything.
    @Test func aFullDiskAtStartUpSaysSo() async throws {
        let first = try DaemonProcess()  // only for its temporary directory, socket and listener
        first.signal(SIGKILL)
        _ = first.waitForExit()
        let disk = try SmallDisk(at: first.directory.file("state"))
        let arguments = ["--socket", first.socketPath, "--state-dir", disk.path, "--config", first.configPath]
        let daemon = try DaemonProcess(arguments: arguments, wrapper: disk.wrapper)
        try await onThread { try daemon.waitUntilReady() }
        _ = try await onThread { try testClient(first.socketPath).call("io.coalesced.App.Register", ["name": .string(Self.app)]) }
        daemon.signal(SIGTERM)
        #expect(try await onThread { daemon.waitForExit() } == 0)
        disk.fill()
        let full = try DaemonProcess(arguments: arguments, wrapper: disk.wrapper)
        #expect(try await onThread { full.waitForExit() } == 1, "\(full.output)")
        #expect(full.output.contains("is full; free space there"), "\(full.output)")
        #expect(!full.output.contains("move it aside"), "\(full.output)")
        disk.free()
        let restarted = try DaemonProcess(arguments: arguments, wrapper: disk.wrapper)
        try await onThread { try restarted.waitUntilReady() }
        let apps = try await onThread { try testClient(first.socketPath).call("io.coalesced.System.ListApps")["apps"] }
        #expect(apps?.arrayValue?.compactMap { $0["name"]?.stringValue } == [Self.app])
        restarted.signal(SIGKILL)
    }
}
