import NIOCore
import NIOEmbedded

/// Time for a manager in process, moved only by the test: the manager's timers run on ``loop``, and its clocks read
/// the loop's time (``now`` for the lifecycle, ``wall`` for the times it reports), so that a deadline of seconds
/// passes when the test moves time, not when it waits.
struct ManualClock: Sendable {
    /// The wall clock's reading at the start: 2027-01-15 08:00 UTC, fixed so that a test can name the times it sees.
    static let wallStart: Double = 1_800_000_000

    let loop: NIOAsyncTestingEventLoop
    private let start: NIODeadline
    private let base: SuspendingClock.Instant

    init(loop: NIOAsyncTestingEventLoop = NIOAsyncTestingEventLoop()) {
        self.loop = loop
        self.start = loop.now
        self.base = SuspendingClock.now
    }

    /// The time passed since the start.
    var elapsed: Duration { .nanoseconds(Int64(self.loop.now.uptimeNanoseconds - self.start.uptimeNanoseconds)) }

    /// The lifecycle's clock.
    var now: SuspendingClock.Instant { self.base.advanced(by: self.elapsed) }

    /// The wall clock, seconds since the Unix epoch.
    var wall: Double {
        let elapsed = self.elapsed.components
        return Self.wallStart + Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    /// Shuts the loop down once what was already handed to it has run. A timer cancelled from another thread just
    /// before hands the loop two jobs (fail its promise, forget the task); a loop already closing drops the first
    /// and runs the second, and the promise that was never completed stops the run in a debug build.
    func shutDown() async {
        _ = try? await self.loop.executeInContext {}
        await self.loop.shutdownGracefully()
    }

    /// Moves time on by `duration`, running every timer that comes due on the way, in order.
    func advance(by duration: Duration) async {
        await self.loop.advanceTime(by: Self.amount(duration))
    }

    /// Moves time on to `elapsed` since the start (never back), running every timer that comes due on the way.
    func advance(to elapsed: Duration) async {
        await self.loop.advanceTime(to: self.start + Self.amount(elapsed))
    }

    /// Runs what is due now (a write the manager scheduled on the loop) without moving time.
    func run() async { await self.loop.run() }

    private static func amount(_ duration: Duration) -> TimeAmount {
        let components = duration.components
        return .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }
}
