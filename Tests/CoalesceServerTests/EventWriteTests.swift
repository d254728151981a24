@testable import CoalesceServer
import CoalesceCore
@testable import CoalesceStore
import Foundation
import CoalesceTestSupport
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Varlink

/// Posts that joined one hold of a suspended app's kind are each answered, even when the store's batch fails
/// before reaching that hold (SQLite took the whole transaction back at an earlier write, as a full disk makes it
/// do). In process, against real SQLite: the batch is arranged by holding the store's writer at a gate.
@Suite struct EventWriteTests {
    /// Holds the writer until released, so that what is submitted meanwhile makes up the next batch.
    final class Gate: StoreOperation, @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        func perform(_ transaction: StoreTransaction) throws {
            self.entered.signal()
            self.release.wait()
        }
        func finish(_ failure: (any Error)?) {}
    }

    /// Fails and takes the whole transaction with it.
    final class RollBack: StoreOperation, @unchecked Sendable {
        func perform(_ transaction: StoreTransaction) throws {
            try transaction.run("ROLLBACK")
            throw StoreError.diskFull(path: "the store (in this test)")
        }
        func finish(_ failure: (any Error)?) {}
    }

    @Test func postsThatJoinedAHoldAreAnsweredWhenItsBatchFailsBeforeIt() async throws {
        let directory = try TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }  // the store's files are in it until the end
        let store = try await onThread { try Store(stateDirectory: directory.path) }
        let mail = try AppName("org.example.mail")
        try await store.save(AppRegistration(name: mail, owner: 0))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let manager = try AppManager(
            store: store,
            daemon: DaemonState(configuration: Configuration()),
            eventLoop: group.next(),
            logger: Logger(label: "test"),
            startUnit: { _ in }
        )
        let root = VarlinkPeer(pid: getpid(), uid: 0, gid: 0)
        let answers = Synchronization.Mutex<[AppManager.PostResult]>([])
        let answered = DispatchSemaphore(value: 0)
        @Sendable func post(_ number: Int) throws {
            try manager.post(target: mail.value, kind: "tick", payload: ["n": .int(Int64(number))], policy: .count, peer: root) {
                result in
                answers.withLock { $0.append(result) }
                answered.signal()
            }
        }

        try await onThread {
            let gate = Gate()
            store.submit(gate)
            gate.entered.wait()
            store.submit(RollBack())
            for number in 1...3 { try post(number) }  // one hold: the second and third join the first
            gate.release.signal()
            for _ in 1...3 { #expect(answered.wait(timeout: .now() + 10) == .success, "every post is answered") }
            let failed = answers.withLock { $0 }.filter { if case .failure(.storageFailed) = $0 { true } else { false } }
            #expect(failed.count == 3, "all three fail with the batch: \(answers.withLock { $0 })")
            #expect(try manager.queue(of: mail.value).held.isEmpty, "nothing of them is held")

            // The store works again: the next post is held, and counted alone.
            try post(4)
            #expect(answered.wait(timeout: .now() + 10) == .success)
            if case .success(let outcome)? = answers.withLock({ $0.last }) { #expect(!outcome.delivered) } else { Issue.record("refused") }
            #expect(try manager.queue(of: mail.value).held.map { "\($0.kind) \($0.slot.count)" } == ["tick 1"])
            #expect(try store.heldRows().map { $0.kind } == ["tick"], "on disk as in memory")
        }
        try await group.shutdownGracefully()
    }

    /// A post decided while a wake's delivery of what the app held is on its way would be sent after it; when the
    /// store refuses that delivery and then keeps the post, the post is held behind what was held rather than
    /// stored as a delivery ahead of it (which a restart would send first). Against a real server and store: the
    /// app attaches over the socket; the batches are arranged with gates on the store's writer.
    @Test func aPostBehindARefusedWakeIsHeldBehindWhatTheAppHeld() async throws {
        let directory = try TemporaryDirectory()
        let store = try await onThread { try Store(stateDirectory: directory.path) }
        let mail = try AppName("org.example.mail")
        try await store.save(AppRegistration(name: mail, owner: 0))
        var configuration = Configuration()
        // The test process is the app's: it must not be killed for not acknowledging its launch.
        configuration.timings.launchAcknowledgement = .seconds(3600)
        let daemon = DaemonState(configuration: configuration)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let manager = try AppManager(store: store, daemon: daemon, eventLoop: group.next(), logger: logger, startUnit: { _ in })
        let server = VarlinkServer(
            service: VarlinkService(
                info: VarlinkServiceInfo(vendor: "v", product: "p", version: "1", url: "u"),
                interfaces: [AppInterface.make(apps: manager, daemon: daemon, refreshes: try RefreshScheduler(apps: manager, logger: logger))],
                protocolErrorInterface: ProtocolInterface.name
            ),
            limits: VarlinkServerLimits(),
            group: group,
            logger: logger
        )
        let socket = directory.file("socket")
        try await server.start(.path(socket))
        async let serving: Void = server.run()
        let root = VarlinkPeer(pid: getpid(), uid: 0, gid: 0)
        let answers = Synchronization.Mutex<[String: AppManager.PostResult]>([:])
        let answered = DispatchSemaphore(value: 0)
        @Sendable func post(_ kind: String) throws {
            try manager.post(target: mail.value, kind: kind, payload: ["kind": .string(kind)], policy: nil, peer: root) { result in
                answers.withLock { $0[kind] = result }
                answered.signal()
            }
        }

        try await onThread {
            try post("earlier")  // held: the app is not running
            #expect(answered.wait(timeout: .now() + 10) == .success)

            // The writer is held at a gate while the wake's delivery is queued behind a second gate and a write
            // that takes the whole transaction back, as a full disk does.
            let first = Gate()
            store.submit(first)
            first.entered.wait()
            let second = Gate()
            store.submit(second)
            store.submit(RollBack())
            let app = try VarlinkClient(path: socket)
            // Generous: a whole test run's load can hold the Attach task back a while.
            app.setReceiveTimeout(.seconds(60))
            try app.send(VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(mail.value)], more: true))
            _ = try app.receiveReply()  // its state
            // The launch that queues the delivery of what it held may still be on its way after that reply: the
            // delivery must be handed to the store, behind the failing write, before the writer is let go.
            try waitUntil("the delivery to be queued", timeout: .seconds(10), poll: .milliseconds(1)) {
                manager.state.withLock { $0.records[mail]?.inbox.draining == true && $0.outbox.isCarriedOut }
            }
            first.release.signal()
            second.entered.wait()
            // The delivery is in the batch the writer is carrying out: this post, decided now, would be sent.
            try post("later")
            second.release.signal()
            #expect(answered.wait(timeout: .now() + 10) == .success, "the later post is answered")

            // Before the delivery is tried again (a second after it was refused), with the writer held once more:
            // on disk, both are held, in the order they were posted, and nothing is stored to be sent.
            let third = Gate()
            store.submit(third)
            third.entered.wait()
            if case .success(let outcome)? = answers.withLock({ $0["later"] }) {
                #expect(!outcome.delivered, "held, not sent")
            } else {
                Issue.record("the later post was refused: \(String(describing: answers.withLock { $0["later"] }))")
            }
            #expect(try store.heldRows().filter { $0.app == mail.value }.sorted { $0.position < $1.position }.map(\.kind) == ["earlier", "later"])
            #expect(try store.deliveryRows().filter { $0.app == mail.value }.isEmpty)
            third.release.signal()

            // The retry delivers both, the earlier first.
            var events: [String] = []
            while events.count < 2 {
                let reply = try app.receiveReply()
                guard let kind = reply.parameters["callback"]?["kind"]?.stringValue, !kind.hasPrefix("lifecycle.") else { continue }
                events.append(kind)
            }
            #expect(events == ["earlier", "later"])
        }
        await server.shutdown()
        await serving
        try await group.shutdownGracefully()
    }
}
