@testable import CoalesceClient
import CoalesceTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import Varlink

/// The Swift client library's async API against the real daemon: the app is a `CoalescedApp` in the test
/// process, the operator's side a System client on the real socket. The daemon takes the test process for the app's,
/// so nothing here terminates the app or lets a deadline pass: either would signal the test runner.
@Suite struct ClientLibraryTests {
    static let notes = "org.example.notes"

    struct Badge: Codable, Equatable {
        var unread: Int
    }

    /// A daemon with its System client.
    final class Device: @unchecked Sendable {
        let daemon: DaemonProcess
        let system: VarlinkClient

        init() async throws {
            // The app is this test process: no deadline may pass, or the daemon would kill the test run.
            self.daemon = try DaemonProcess(configuration: noDeadlines)
            try await onThread { [daemon] in try daemon.waitUntilReady() }
            self.system = try testClient(self.daemon.socketPath)
        }

        func app(delegate: (any AppDelegate)? = nil) -> CoalescedApp {
            CoalescedApp(
                // The app is this test process: it asks to be left running while suspended.
                AppDeclaration(
                    name: ClientLibraryTests.notes, suspension: .cooperative,
                    kinds: ["badge": KindDeclaration(.sum(field: "unread"))]
                ),
                socketPath: self.daemon.socketPath,
                delegate: delegate
            )
        }

        @discardableResult
        func call(_ method: String, _ parameters: JSONObject = [:]) async throws -> JSONObject {
            try await onThread { try self.system.call("io.coalesced.System." + method, parameters) }
        }

        func waitForState(_ state: String) async throws {
            try await onThread { _ = try waitForApp(self.system, ClientLibraryTests.notes, "state", .string(state)) }
        }

        /// Events sent to the app and not acknowledged.
        func unacknowledged() async throws -> Int64? {
            try await self.call("GetQueue", ["app": .string(ClientLibraryTests.notes)])["unacknowledged"]?.intValue
        }
    }

    /// What the app's loop received, one at a time.
    final class Deliveries {
        private var iterator: AsyncStream<Delivery>.Iterator
        init(_ stream: AsyncStream<Delivery>) { self.iterator = stream.makeAsyncIterator() }
        func next() async -> Delivery? { await self.iterator.next() }
    }

    @Test func callbacksAndEventsComeInOrderEachAcknowledgedWhenItsLoopBodyEnds() async throws {
        let device = try await Device()
        let app = device.app()
        let (received, receiving) = AsyncStream.makeStream(of: Delivery.self)
        let (releases, release) = AsyncStream.makeStream(of: Void.self)
        // The app's loop: the body of a badge event ends when the test releases it.
        let loop = Task {
            var released = releases.makeAsyncIterator()
            for try await delivery in app.events {
                receiving.yield(delivery)
                if case .event = delivery { _ = await released.next() }
            }
            receiving.finish()
        }
        let deliveries = Deliveries(received)
        #expect(await deliveries.next() == .willFinishLaunching(LaunchOptions(destination: .foreground)))
        #expect(await deliveries.next() == .didFinishLaunching(LaunchOptions(destination: .foreground)))
        #expect(await deliveries.next() == .didBecomeActive)
        try await device.waitForState("active")

        // An event posted through the app's own request connection arrives at once, its payload decodable.
        let result = try await app.post(to: Self.notes, kind: "badge", payload: Badge(unread: 2))
        #expect(result.delivered && result.recipients == 1 && result.refused.isEmpty)
        guard case .event(let event)? = await deliveries.next() else {
            Issue.record("the post did not arrive as an event")
            return
        }
        #expect(event.kind == "badge" && event.count == 1)
        #expect(try event.decode(Badge.self) == Badge(unread: 2))
        // Its loop body has not ended: not acknowledged. Once it ends, it is.
        #expect(try await device.unacknowledged() == 1)
        release.yield()
        try await waitUntil("the event to be acknowledged") { try await device.unacknowledged() == 0 }

        // Home: suspended once didEnterBackground's body ended.
        try await device.call("Deactivate")
        #expect(await deliveries.next() == .willResignActive)
        #expect(await deliveries.next() == .didEnterBackground)
        try await device.waitForState("suspended")
        #expect(app.state == .background, "the state the last delivery carried")

        // Posts to the suspended app are held and folded; the wake delivers one event with their sum and count.
        for unread in [1, 2, 3] {
            #expect(try await app.post(to: Self.notes, kind: "badge", payload: Badge(unread: unread)).delivered == false)
        }
        try await device.call("Activate", ["app": .string(Self.notes)])
        #expect(await deliveries.next() == .willEnterForeground)
        #expect(await deliveries.next() == .didBecomeActive)
        guard case .event(let woken)? = await deliveries.next() else {
            Issue.record("the wake delivered no event")
            return
        }
        #expect(woken.count == 3)
        #expect(try woken.decode(Badge.self) == Badge(unread: 6))
        release.yield()
        try await waitUntil("the wake's event to be acknowledged") { try await device.unacknowledged() == 0 }

        // Cancelling the loop's task ends the sequence and closes the stream: the daemon takes it as the app's exit.
        // (Not Terminate: the process the daemon would signal is this test's.)
        loop.cancel()
        #expect(await deliveries.next() == nil)
        try await loop.value
        try await device.waitForState("notRunning")
    }

    @Test func backgroundTasksAndSavedStateGoThroughTheRequestConnection() async throws {
        let device = try await Device()
        let app = device.app()
        let (received, receiving) = AsyncStream.makeStream(of: Delivery.self)
        let loop = Task {
            for try await delivery in app.events { receiving.yield(delivery) }
        }
        let deliveries = Deliveries(received)
        #expect(await deliveries.next() == .willFinishLaunching(LaunchOptions(destination: .foreground)))
        #expect(await deliveries.next() == .didFinishLaunching(LaunchOptions(destination: .foreground)))
        try await app.saveState("page=7")
        let task = try await app.beginBackgroundTask("upload")
        #expect(task.name == "upload" && (task.remaining ?? .zero) > .zero)
        // In the foreground the whole budget is left (BackgroundTaskBudgetSec=, 30 s by default).
        #expect(try await app.backgroundTimeRemaining() == .seconds(30))
        #expect(try await device.call("GetApp", ["app": .string(Self.notes)])["app"]?["tasks"] == 1)
        try await app.endBackgroundTask(task)
        #expect(try await device.call("GetApp", ["app": .string(Self.notes)])["app"]?["tasks"] == 0)
        loop.cancel()
        // Ending the loop closes the stream: the daemon takes it as the app's exit.
        try await device.waitForState("notRunning")
        _ = await loop.result

        // The next launch hands the saved state back.
        let relaunched = device.app()
        var again = relaunched.events.makeAsyncIterator()
        // Its last process ended on its own (the loop closed its stream), unasked: recover what it saved.
        let options = LaunchOptions(destination: .foreground, restoration: .recover, restoredState: "page=7")
        #expect(try await again.next() == .willFinishLaunching(options))
        #expect(try await again.next() == .didFinishLaunching(options))
    }

    @Test func errorsAreTypedWithTheirParameters() async throws {
        let missing = "/nonexistent/io.coalesced"
        let unreachable = CoalescedApp(AppDeclaration(name: Self.notes), socketPath: missing)
        let expected = CoalescedError.daemonUnreachable(socketPath: missing, reason: "No such file or directory")
        await #expect(throws: expected) { try await unreachable.register() }
        await #expect(throws: expected) { for try await _ in unreachable.events {} }
        #expect(expected.description.contains(missing))

        let device = try await Device()
        let app = device.app()
        try await app.register()
        await #expect(throws: CoalescedError.unknownTarget(target: "org.example.nobody")) {
            try await app.post(to: "org.example.nobody", kind: "badge", payload: Badge(unread: 1))
        }
        await #expect(throws: CoalescedError.noSuchTask(app: Self.notes, id: 99)) {
            try await app.endBackgroundTask(BackgroundTask(id: 99, name: "upload", remaining: .zero))
        }
        do throws(CoalescedError) {
            try await app.post(to: Self.notes, kind: "Not A Kind")
            Issue.record("an invalid kind was posted")
        } catch {
            guard case .invalidKind(let kind, let reason) = error else { throw error }
            #expect(kind == "Not A Kind" && !reason.isEmpty)
        }
        do throws(CoalescedError) {
            try await app.post(to: Self.notes, kind: "badge", payload: [1, 2])
            Issue.record("an array was posted")
        } catch {
            guard case .invalidPayload(let kind, let reason) = error else { throw error }
            #expect(kind == "badge" && reason.contains("[1,2]"))
        }
        do throws(CoalescedError) {
            try await CoalescedApp(AppDeclaration(name: "Not A Name"), socketPath: device.daemon.socketPath).register()
            Issue.record("an invalid name was registered")
        } catch {
            guard case .invalidAppName(let name, _) = error else { throw error }
            #expect(name == "Not A Name")
        }
        // An error this library does not know keeps its name and parameters.
        let unknown = CoalescedError(VarlinkError(name: "io.coalesced.App.InvalidPolicy", parameters: ["reason": "no such policy"]))
        #expect(unknown == .refused(name: "io.coalesced.App.InvalidPolicy", parameters: #"{"reason":"no such policy"}"#))
    }

    /// Records the callbacks it is handed.
    final class Recorder: AppDelegate {
        let deliveries = Mutex<[Delivery]>([])
        func app(_ app: CoalescedApp, handle delivery: Delivery) async {
            self.deliveries.withLock { $0.append(delivery) }
        }
    }

    @Test func aServiceGroupRunsTheAppUntilItsGracefulShutdown() async throws {
        let device = try await Device()
        let recorder = Recorder()
        let app = device.app(delegate: recorder)
        let group = ServiceGroup(services: [app], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        // Waited for, then compared: what arrived shows if it is not the launch's two callbacks.
        try await waitUntil("the delegate to be launched", timeout: .seconds(60)) { recorder.deliveries.withLock { $0.count } >= 3 }
        #expect(recorder.deliveries.withLock { $0 } == [
            .willFinishLaunching(LaunchOptions(destination: .foreground)), .didFinishLaunching(LaunchOptions(destination: .foreground)),
            .didBecomeActive,
        ])
        try await device.waitForState("active")
        await group.triggerGracefulShutdown()
        try await running.value
        // The graceful shutdown closed the stream: the daemon takes it as the app's exit.
        try await device.waitForState("notRunning")
    }
}
