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
        func undo() {}
        func finish(_ failure: (any Error)?) {}
    }

    /// Fails and takes the whole transaction with it.
    final class RollBack: StoreOperation, @unchecked Sendable {
        func perform(_ transaction: StoreTransaction) throws {
            try transaction.run("ROLLBACK")
            throw StoreError("the disk is full (in this test)")
        }
        func undo() {}
        func finish(_ failure: (any Error)?) {}
    }

    @Test func postsThatJoinedAHoldAreAnsweredWhenItsBatchFailsBeforeIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coalesced-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(stateDirectory: directory.path)
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
        let answers = Mutex<[AppManager.PostResult]>([])
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
        }
        try await group.shutdownGracefully()
    }
}
