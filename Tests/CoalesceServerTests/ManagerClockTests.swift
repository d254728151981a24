@testable import CoalesceServer
import CoalesceCore
import CoalesceStore
import CoalesceTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Testing
@testable import Varlink

/// The manager in process, without sockets, on a manual clock: its timers run on an `NIOAsyncTestingEventLoop` and
/// its clock reads that loop's time, so a deadline of seconds passes when the test moves time, not when it waits.
/// The app's stream is an `NIOAsyncTestingChannel` the test reads; the store is real SQLite in a temporary directory.
@Suite struct ManagerClockTests {
    static let mail = "org.example.mail"

    /// A manager with one registered app, attached on a testing channel; `body` gets the manager, the loop and a
    /// reader of what the app's stream was sent.
    func withAttachedApp(
        configuration configured: Configuration? = nil,
        _ body: (AppManager, NIOAsyncTestingEventLoop, () async throws -> [JSONValue]) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(stateDirectory: directory.path)
        var configuration = configured ?? Configuration()
        if configured == nil { configuration.timings.launchAcknowledgement = .seconds(5) }
        let loop = NIOAsyncTestingEventLoop()
        let start = loop.now
        let base = SuspendingClock.now
        let manager = try AppManager(
            store: store,
            daemon: DaemonState(configuration: configuration),
            eventLoop: loop,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            startUnit: { _ in },
            now: { base.advanced(by: .nanoseconds(Int64(loop.now.uptimeNanoseconds - start.uptimeNanoseconds))) }
        )
        _ = try await manager.register(
            name: Self.mail, traits: AppTraits(), launchUnit: .keep, declarations: EventDeclarations(), uid: 0, limit: 10
        )
        let channel = NIOAsyncTestingChannel(loop: loop)
        // An address in memory only: the testing channel connects to nothing.
        try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/coalesced-test/app")).get()
        let responder = VarlinkResponder(
            channel: channel,
            call: VarlinkCall(method: "io.coalesced.App.Attach", parameters: ["app": .string(Self.mail)], more: true)
        )
        // A pid no process can have: a kill the lifecycle decides signals nothing.
        let peer = VarlinkPeer(pid: Int32.max, uid: 0, gid: 0)
        async let attached: Void = try manager.attach(name: Self.mail, peer: peer, process: nil, responder: responder)
        // Attach runs in its own task: wait (bounded) for the launch it makes.
        for _ in 0..<5_000 where (try? manager.get(Self.mail).state) != .active {
            try await Task.sleep(for: .milliseconds(1))
        }
        @Sendable func sent() async throws -> [JSONValue] {
            await loop.run()
            var replies: [JSONValue] = []
            while let buffer = try await channel.readOutbound(as: ByteBuffer.self) {
                for frame in buffer.readableBytesView.split(separator: 0) {
                    replies.append(try JSONParser.parse(String(decoding: frame, as: UTF8.self)))
                }
            }
            return replies
        }
        try await body(manager, loop, sent)
        _ = try? manager.terminate(name: Self.mail)  // ends the stream, unless the app is already not running
        await loop.run()
        try await attached
        await loop.shutdownGracefully()
    }

    /// The callbacks among replies, by kind.
    static func callbacks(_ replies: [JSONValue]) -> [String] {
        replies.compactMap { $0["parameters"]?["callback"]?["kind"]?.stringValue }
    }

    @Test func aLaunchNotAcknowledgedInTimeIsKilledWhenTheDeadlinePassesOnTheManualClock() async throws {
        try await self.withAttachedApp { manager, loop, sent in
            let launch = try await sent()
            #expect(Self.callbacks(launch) == ["lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            #expect(try manager.get(Self.mail).state == .active)
            await loop.advanceTime(by: .milliseconds(4_999))
            #expect(try manager.get(Self.mail).state == .active, "its deadline has not passed")
            await loop.advanceTime(by: .milliseconds(1))
            #expect(try manager.get(Self.mail).state == .notRunning, "killed at its deadline")
            let last = try await sent().last
            #expect(last?["parameters"]?["state"] == "notRunning", "its stream ended")
        }
    }

    @Test func aLaunchAcknowledgedInTimeKeepsRunningLongAfterTheDeadline() async throws {
        try await self.withAttachedApp { manager, loop, sent in
            let replies = try await sent()
            let launch = try #require(replies.first { $0["parameters"]?["callback"]?["kind"] == "lifecycle.didFinishLaunching" })
            let seq = try #require(launch["parameters"]?["callback"]?["seq"]?.intValue)
            try manager.acknowledge(name: Self.mail, uid: 0, upTo: UInt64(seq))
            await loop.advanceTime(by: .seconds(3600))
            #expect(try manager.get(Self.mail).state == .active)
        }
    }

    /// `infinity` turns a deadline off: an app that never acknowledges its launch or its move to the background, and
    /// holds a background task, runs on through a year of the manual clock, told nothing of an expiry.
    @Test func infiniteDeadlinesAndBudgetNeverFireOnTheManualClock() async throws {
        let configuration = try Configuration.parse([
            ConfigurationSource(path: "coalesced.conf", text: "[Apps]\nAcknowledgeTimeoutSec=infinity\nBackgroundTaskBudgetSec=infinity\n")
        ])
        try await self.withAttachedApp(configuration: configuration) { manager, loop, sent in
            #expect(Self.callbacks(try await sent()) == ["lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            await loop.advanceTime(by: .seconds(366 * 24 * 3600))
            #expect(try manager.get(Self.mail).state == .active, "no deadline to acknowledge the launch by")
            let task = try manager.beginBackgroundTask(name: Self.mail, uid: 0, taskName: "upload")
            #expect(task.remaining == nil, "no budget")
            _ = try manager.deactivate(name: Self.mail)
            #expect(Self.callbacks(try await sent()) == ["lifecycle.willResignActive", "lifecycle.didEnterBackground"])
            await loop.advanceTime(by: .seconds(366 * 24 * 3600))
            #expect(try manager.get(Self.mail).state == .background, "neither killed nor suspended")
            #expect(Self.callbacks(try await sent()).isEmpty, "no backgroundTaskWillExpire")
        }
    }
}
