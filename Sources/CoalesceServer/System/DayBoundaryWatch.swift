import CoalesceCore
import Synchronization

/// Waits for each day boundary in the machine's zone (``DayBoundary``: local midnight, a change of offset) and
/// hands it on. The wait is counted in wall seconds at the start and slept on the continuous clock, which counts a
/// suspend; a setting of the wall clock, a new zone and a wake call ``rearm()``, so that the wait is counted again.
final class DayBoundaryWatch: Sendable {
    typealias Sleep = @Sendable (Duration) async throws -> Void

    private let zone: @Sendable () -> ZoneRules
    private let wallSeconds: @Sendable () -> Double
    private let sleep: Sleep
    private let reached: @Sendable (DayBoundary) -> Void
    private let waiting = Mutex<Task<Void, Never>?>(nil)

    /// - Parameters:
    ///   - zone: the machine's zone, read at each wait (it may have changed).
    ///   - reached: called once per boundary, after it has come.
    init(
        zone: @escaping @Sendable () -> ZoneRules,
        wallSeconds: @escaping @Sendable () -> Double,
        sleep: @escaping Sleep = { try await Task.sleep(for: $0, clock: .continuous) },
        reached: @escaping @Sendable (DayBoundary) -> Void
    ) {
        self.zone = zone
        self.wallSeconds = wallSeconds
        self.sleep = sleep
        self.reached = reached
    }

    /// Counts the wait for the next boundary again from now (and starts waiting, the first time).
    func rearm() {
        let (zone, wallSeconds, sleep, reached) = (self.zone, self.wallSeconds, self.sleep, self.reached)
        let task = Task {
            while !Task.isCancelled {
                let now = wallSeconds()
                let boundary = DayBoundary.next(after: Int64(now.rounded(.down)), in: zone())
                let wait = Duration.milliseconds(Int64(((Double(boundary.seconds) - now) * 1000).rounded(.up)))
                do { try await sleep(wait) } catch { return }
                // Early (the clock was set back meanwhile, and its report has not come yet): count again.
                guard !Task.isCancelled, wallSeconds() >= Double(boundary.seconds) else { continue }
                reached(boundary)
            }
        }
        self.waiting.withLock { waiting in
            waiting?.cancel()
            waiting = task
        }
    }

    func stop() {
        self.waiting.withLock { waiting in
            waiting?.cancel()
            waiting = nil
        }
    }
}
