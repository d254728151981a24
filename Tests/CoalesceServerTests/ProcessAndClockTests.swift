import Foundation
import Synchronization
import Testing

@testable import CoalesceServer
@testable import Systemd

/// What the daemon asks of the kernel about itself through Systemd: its descriptor limit, threads of its own, the
/// clocks, calendar dates and the user database. (The environment is left out: setting a variable while other
/// tests' threads read theirs is not safe in one process.)
@Suite struct ProcessAndClockTests {
    @Test func theDescriptorLimitIsRaisedToTheHardLimit() throws {
        let before = try #require(DescriptorLimit.current())
        let inForce = DescriptorLimit.raiseToHardLimit()
        let after = try #require(DescriptorLimit.current())
        #expect(after.hard == before.hard)
        #expect(after.soft == after.hard)
        #expect(inForce == after.soft)
        #expect(raiseDescriptorLimit() == inForce)
    }

    @Test func aDedicatedThreadRunsItsBodyOnAThreadOfItsOwnAndIsJoined() throws {
        let published = try Wakeup()
        let holder = Mutex<DedicatedThread?>(nil)
        let seen = Mutex<(ran: Bool, wasCurrent: Bool)>((false, false))
        let thread = try DedicatedThread {
            // Waits, with a deadline, for the handle to be published, so that it can ask whether it is its own.
            let ready = (try? Poll.wait([(published.descriptor, .readable)], timeout: .seconds(10))) == [.readable]
            let current = ready && holder.withLock { $0?.isCurrent ?? false }
            seen.withLock { $0 = (true, current) }
        }
        holder.withLock { $0 = thread }
        published.set()
        #expect(!thread.isCurrent)
        thread.join()
        #expect(seen.withLock { $0.ran && $0.wasCurrent })
    }

    @Test func theClocksReadAsTheSystemDoes() throws {
        let wall = try SystemClock.realtime.read()
        #expect(abs(wall.totalSeconds - Date().timeIntervalSince1970) < 5)
        #expect((0..<1_000_000_000).contains(wall.nanoseconds))
        #expect(abs(wallClock() - Date().timeIntervalSince1970) < 5)
        let first = SystemClock.monotonic.now().totalNanoseconds
        #expect(SystemClock.monotonic.now().totalNanoseconds >= first)
        #expect(try SystemClock.boottime.read().totalNanoseconds >= first)
    }

    @Test func aLocalDateGoesToSecondsAndBack() throws {
        let parts = CalendarTime.Parts(year: 2026, month: 1, day: 15, hour: 12, minute: 30, second: 5)
        let seconds = try #require(CalendarTime.seconds(ofLocal: parts))
        #expect(CalendarTime.localText(Double(seconds), format: "%Y-%m-%d %H:%M:%S") == "2026-01-15 12:30:05")
    }

    @Test func theUserDatabaseKnowsRootAndItsGroupAndNotAnUnknownUserOrGroup() throws {
        let root = try #require(UserDatabase.groups(ofUser: 0))
        #expect(root.primary == 0)
        #expect(root.all.contains(0))
        #expect(UserDatabase.groups(ofUser: 3_999_999_999) == nil)
        #expect(UserDatabase.groupID(named: "root") == 0)
        #expect(UserDatabase.groupID(named: "no-such-group-\(getpid())") == nil)
        #expect(CurrentProcess.effectiveUserID == geteuid())
    }
}
