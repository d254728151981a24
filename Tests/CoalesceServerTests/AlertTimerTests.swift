import CoalesceCore
import CoalesceTestSupport
import Foundation
import Synchronization
import Testing

@testable import CoalesceServer

/// The timer on the real clocks, the real timerfds and a real inotify watch on a temporary directory standing for
/// /etc. Each test waits for the events it expects, with a deadline. That something did not happen is shown by a
/// later event that comes after it in the thread's order: a zone change (the timer's thread reads the watch before
/// the timers in each turn), so a wrong report would be in the list before it.
///
/// Not tested here: ``AlertTimer/Event/clockChanged``, which needs the host's clock set, and tests never set it.
@Suite struct AlertTimerTests {
    /// A timer whose zone link is `localtime` in a temporary directory, recording each event with the clocks read
    /// when it came.
    final class Harness: Sendable {
        let directory: TemporaryDirectory
        let recorded = TestMutex<[(event: AlertTimer.Event, at: ClockReading)]>([])
        let timer: AlertTimer

        init(zoneSettle: Duration = .zero) throws {
            let directory = try TemporaryDirectory()
            #expect(symlink("/usr/share/zoneinfo/Europe/Berlin", directory.file("localtime")) == 0)
            self.directory = directory
            let box = Box()
            self.timer = try AlertTimer(localtimePath: directory.file("localtime"), zoneSettle: zoneSettle) { event in
                box.harness?.record(event)
            }
            self.box = box
            box.harness = self
        }

        /// Hands events to the harness, which the timer cannot capture before it exists.
        final class Box: @unchecked Sendable {
            // Written once, before the first arm; read on the timer's thread after.
            weak var harness: Harness?
        }
        private let box: Box

        deinit { self.timer.stop() }

        /// The timer's thread, as the first event shows it.
        let threadID = TestMutex<pid_t?>(nil)

        func record(_ event: AlertTimer.Event) {
            let now = AlertTimer.now()
            if self.threadID.withLock({ $0 }) == nil {
                // /proc/thread-self links to PID/task/TID (Glibc's module leaves out gettid).
                let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
                let thread = link.flatMap { $0.split(separator: "/").last }.flatMap { pid_t($0) }
                self.threadID.withLock { $0 = $0 ?? thread }
            }
            self.recorded.withLock { $0.append((event, now)) }
        }

        var events: [AlertTimer.Event] { self.recorded.withLock { $0.map(\.event) } }

        /// Waits until `count` events came; returns them with their clocks.
        @discardableResult
        func waitForEvents(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [(
            event: AlertTimer.Event, at: ClockReading
        )] {
            try await onThread {
                try waitUntil("\(count) events (came: \(self.events))", timeout: timeout) {
                    let recorded = self.recorded.withLock { $0 }
                    return recorded.count >= count ? recorded : nil
                }
            }
        }

        /// Replaces the zone link as timedatectl does: a link under a temporary name, renamed over it.
        func replaceZoneLink(with target: String = "/usr/share/zoneinfo/Asia/Tokyo") {
            let temporary = self.directory.file(".#localtime.new")
            #expect(symlink(target, temporary) == 0)
            #expect(rename(temporary, self.directory.file("localtime")) == 0)
        }

        /// Ends a test's list: a zone change reported after everything before it; returns all the events.
        func flush() async throws -> [AlertTimer.Event] {
            let before = self.events.count
            self.replaceZoneLink()
            try await self.waitForEvents(before + 1)
            return self.events
        }
    }

    @Test func aBootTimerFiresOnceAtItsDate() async throws {
        let harness = try Harness()
        let due = AlertTimer.now().boot.advanced(by: .milliseconds(200))
        harness.timer.arm(wall: nil, boot: due)
        let fired = try await harness.waitForEvents(1)
        #expect(fired[0].event == .expired)
        #expect(fired[0].at.boot >= due)
        // Not again: the zone change after it is the next event.
        #expect(try await harness.flush() == [.expired, .timeZoneChanged])
    }

    @Test func aWallTimerFiresAtItsDate() async throws {
        let harness = try Harness()
        let due = AlertTimer.now().wall.advanced(by: .milliseconds(200))
        harness.timer.arm(wall: due, boot: nil)
        let fired = try await harness.waitForEvents(1)
        #expect(fired[0].event == .expired)
        #expect(fired[0].at.wall >= due)
        #expect(try await harness.flush() == [.expired, .timeZoneChanged])
    }

    @Test func armingAgainAtALaterDateReplacesTheEarlierOne() async throws {
        let harness = try Harness()
        let now = AlertTimer.now()
        harness.timer.arm(
            wall: now.wall.advanced(by: .milliseconds(100)), boot: now.boot.advanced(by: .milliseconds(100)))
        let later = AlertTimer.now().advanced(by: .milliseconds(500))
        harness.timer.arm(wall: nil, boot: later.boot)
        let boot = try await harness.waitForEvents(1)
        #expect(boot[0].at.boot >= later.boot)

        let next = AlertTimer.now()
        harness.timer.arm(wall: next.wall.advanced(by: .milliseconds(100)), boot: nil)
        let laterWall = AlertTimer.now().wall.advanced(by: .milliseconds(500))
        harness.timer.arm(wall: laterWall, boot: nil)
        let wall = try await harness.waitForEvents(2)
        #expect(wall[1].at.wall >= laterWall)
        #expect(try await harness.flush() == [.expired, .expired, .timeZoneChanged])
    }

    @Test func disarmingStopsATimer() async throws {
        let harness = try Harness()
        // The boot timer disarmed; a wall timer after its date shows it did not fire.
        let now = AlertTimer.now()
        harness.timer.arm(wall: nil, boot: now.boot.advanced(by: .milliseconds(100)))
        harness.timer.arm(wall: nil, boot: nil)
        let wallDue = now.wall.advanced(by: .milliseconds(400))
        harness.timer.arm(wall: wallDue, boot: nil)
        let first = try await harness.waitForEvents(1)
        #expect(first[0].at.wall >= wallDue)

        // The wall timer disarmed; a boot timer after its date shows it did not fire.
        let then = AlertTimer.now()
        harness.timer.arm(wall: then.wall.advanced(by: .milliseconds(100)), boot: nil)
        harness.timer.arm(wall: nil, boot: nil)
        let bootDue = then.boot.advanced(by: .milliseconds(400))
        harness.timer.arm(wall: nil, boot: bootDue)
        let second = try await harness.waitForEvents(2)
        #expect(second[1].at.boot >= bootDue)
        #expect(try await harness.flush() == [.expired, .expired, .timeZoneChanged])
    }

    @Test func aDateAlreadyPastFiresAtOnce() async throws {
        let harness = try Harness()
        let now = AlertTimer.now()
        harness.timer.arm(wall: now.wall.advanced(by: .seconds(-1)), boot: nil)
        try await harness.waitForEvents(1)
        // The clocks' origins and before: a timerfd takes a zero date as "disarm" and refuses a negative one.
        harness.timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
        try await harness.waitForEvents(2)
        harness.timer.arm(wall: WallTime(seconds: -86_400), boot: nil)
        try await harness.waitForEvents(3)
        harness.timer.arm(wall: nil, boot: now.boot.advanced(by: .seconds(-1)))
        try await harness.waitForEvents(4)
        #expect(try await harness.flush() == [.expired, .expired, .expired, .expired, .timeZoneChanged])
    }

    @Test func bothTimersExpiringReportTwice() async throws {
        let harness = try Harness()
        let now = AlertTimer.now()
        harness.timer.arm(wall: now.wall, boot: now.boot)
        try await harness.waitForEvents(2)
        #expect(try await harness.flush() == [.expired, .expired, .timeZoneChanged])
    }

    @Test func theThreadSleepsWhileItWaits() async throws {
        let harness = try Harness(zoneSettle: .milliseconds(50))
        // A zone report gathered (poll then has a timeout) and made, and an expiry: the thread is back to waiting.
        harness.replaceZoneLink()
        try await harness.waitForEvents(1)
        harness.timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
        try await harness.waitForEvents(2)
        let thread = try #require(harness.threadID.withLock { $0 })
        let before = try Self.cpuTicks(of: thread)
        // A second with nothing to do, measured by the timer itself.
        harness.timer.arm(wall: nil, boot: AlertTimer.now().boot.advanced(by: .seconds(1)))
        try await harness.waitForEvents(3)
        let used = try Self.cpuTicks(of: thread) - before
        // A thread that spins uses about 100 ticks (of 10 ms) in that second; a waiting one none.
        #expect(used <= 10, "the timer's thread used \(used) ticks of CPU while it waited a second")
    }

    /// The user and system CPU time of a thread of this process, in clock ticks (proc_pid_stat(5): fields 14, 15).
    static func cpuTicks(of thread: pid_t) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/self/task/\(thread)/stat", encoding: .utf8)
        // After the command name in parentheses, which may hold spaces, the fields from the third on.
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        return try #require(Int(fields[11])) + #require(Int(fields[12]))
    }

    @Test func stopReturnsAndCanBeCalledAgain() async throws {
        let harness = try Harness()
        harness.timer.arm(wall: nil, boot: AlertTimer.now().boot.advanced(by: .seconds(30)))
        harness.timer.stop()
        harness.timer.stop()
        // Armed after stop: nothing, and no descriptor of someone else's touched.
        harness.timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
    }

    @Test func stopFromTheEventHandlerEndsTheTimer() async throws {
        let calls = TestMutex(0)
        let timerBox = TestMutex<AlertTimer?>(nil)
        let directory = try TemporaryDirectory()
        let timer = try AlertTimer(localtimePath: directory.file("localtime")) { _ in
            calls.withLock { $0 += 1 }
            timerBox.withLock { $0 }?.stop()
        }
        timerBox.withLock { $0 = timer }
        let now = AlertTimer.now()
        // Both expire at once; the first report stops the timer, and the second is not made.
        timer.arm(wall: now.wall, boot: now.boot)
        try await onThread { try waitUntil("the event handler to run") { calls.withLock { $0 } > 0 } }
        timer.stop()
        #expect(calls.withLock { $0 } == 1)
        timerBox.withLock { $0 = nil }
    }

    @Test func replacingTheZoneLinkByRenameIsReported() async throws {
        let harness = try Harness()
        harness.replaceZoneLink()
        let events = try await harness.waitForEvents(1)
        #expect(events[0].event == .timeZoneChanged)
    }

    @Test func otherFilesInTheDirectoryAreNotReported() async throws {
        let harness = try Harness()
        try harness.directory.write("timezone", "Europe/Berlin\n")  // created, written, renamed into place
        #expect(chmod(harness.directory.file("timezone"), 0o600) == 0)
        #expect(symlink("/usr/share/zoneinfo/UTC", harness.directory.file("localtime.old")) == 0)
        #expect(rename(harness.directory.file("localtime.old"), harness.directory.file("localtime.bak")) == 0)
        #expect(unlink(harness.directory.file("localtime.bak")) == 0)
        #expect(unlink(harness.directory.file("timezone")) == 0)
        // An expiry after those changes: the thread read them before it, and reported nothing for them.
        harness.timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
        try await harness.waitForEvents(1)
        #expect(try await harness.flush() == [.expired, .timeZoneChanged])
    }

    @Test func aBurstOfZoneChangesIsReportedOnce() async throws {
        // Long enough that both halves of the burst fall within it on a machine loaded by a whole test run.
        let harness = try Harness(zoneSettle: .seconds(2))
        // As `ln -sf` does it: removed, then created, one right after the other: two changes, one report.
        #expect(unlink(harness.directory.file("localtime")) == 0)
        #expect(symlink("/usr/share/zoneinfo/Asia/Tokyo", harness.directory.file("localtime")) == 0)
        try await harness.waitForEvents(1, timeout: .seconds(40))
        // An expiry after the report: nothing more was reported for the burst before it.
        harness.timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
        try await harness.waitForEvents(2)
        #expect(harness.events == [.timeZoneChanged, .expired])
    }

    @Test func aZoneLinkThatCannotBeWatchedLeavesTheTimersWorking() async throws {
        let events = TestMutex<[AlertTimer.Event]>([])
        let timer = try AlertTimer(localtimePath: "/nonexistent-coalesced-test/localtime", watchingZone: false) { event in
            events.withLock { $0.append(event) }
        }
        defer { timer.stop() }
        #expect(timer.watchZone()?.failure == "inotify_add_watch(/nonexistent-coalesced-test) failed: No such file or directory")
        #expect(timer.watchZone() == nil, "tried once")
        timer.arm(wall: nil, boot: BootTime(nanoseconds: 0))
        try await onThread { try waitUntil("the boot timer to fire") { events.withLock { $0 } == [.expired] } }
    }
}
