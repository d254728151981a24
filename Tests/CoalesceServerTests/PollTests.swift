import Foundation
import Testing

@testable import Systemd

/// Waiting on descriptors: poll's timeouts, the wakeup one thread sets for another, PSI triggers.
@Suite struct PollTests {
    @Test(arguments: [
        (Duration.zero, Int32(0)),
        (.nanoseconds(-5), 0),
        (.seconds(-2), 0),
        (.nanoseconds(1), 1),
        (.milliseconds(1), 1),
        (.nanoseconds(1_000_001), 2),
        (.milliseconds(1500), 1500),
        (.seconds(3600), 3_600_000),
        (.seconds(Int64.max), Int32.max),
    ])
    func aTimeoutIsRoundedUpToWholeMilliseconds(duration: Duration, milliseconds: Int32) {
        #expect(Poll.milliseconds(duration) == milliseconds)
    }

    @Test func aWaitReportsTheSetDescriptorAndPassesOverANegativeOne() throws {
        let wakeup = try Wakeup()
        #expect(try Poll.wait([(-1, .readable), (wakeup.descriptor, .readable)], timeout: .zero) == [[], []])
        wakeup.set()
        #expect(try Poll.wait([(-1, .readable), (wakeup.descriptor, .readable)], timeout: nil) == [[], .readable])
        wakeup.clear()
        #expect(try Poll.wait([(wakeup.descriptor, .readable)], timeout: .milliseconds(1)) == [[]])
    }

    @Test func aClosedDescriptorIsReportedInvalid() throws {
        let wakeup = try Wakeup()
        let descriptor = wakeup.descriptor
        wakeup.close()
        #expect(try Poll.wait([(descriptor, .readable)], timeout: .zero) == [.invalid])
    }

    @Test func aWaiterWakesWhenAnotherThreadSetsItsWakeup() async throws {
        let wakeup = try Wakeup()
        // On a thread of its own: a task blocked in the wait would hold one of the concurrency pool's few threads
        // until this test's task, which sets the wakeup, got a thread again.
        let waited = Task.detached {
            await withCheckedContinuation { (continuation: CheckedContinuation<Duration, Never>) in
                Thread.detachNewThread {
                    let start = ContinuousClock.now
                    // Far longer than the test takes: only the set ends this wait.
                    wakeup.wait(for: .seconds(600))
                    continuation.resume(returning: ContinuousClock.now - start)
                }
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        wakeup.set()
        #expect(await waited.value < .seconds(300))
        // The wait cleared it: the next one lasts its timeout.
        #expect(try Poll.wait([(wakeup.descriptor, .readable)], timeout: .zero) == [[]])
    }

    @Test func aTriggerNamesTheCallThatFailed() throws {
        #expect(throws: SystemdError(operation: "open(/nonexistent/memory)", errno: ENOENT)) {
            _ = try PressureTrigger(path: "/nonexistent/memory", threshold: "some 150000 2000000")
        }
        let path = "/proc/pressure/memory"
        guard access(path, R_OK | W_OK) == 0 else { return }  // no PSI here, or not writable by this user
        // The kernel refuses a window under 500 ms.
        #expect(throws: SystemdError(operation: "write(\(path))", errno: EINVAL)) {
            _ = try PressureTrigger(path: path, threshold: "some 100 1000")
        }
        let trigger = try PressureTrigger(path: path, threshold: "some 150000 2000000")
        #expect(trigger.descriptor >= 0)
        trigger.close()
        #expect(trigger.descriptor == -1)
    }
}
