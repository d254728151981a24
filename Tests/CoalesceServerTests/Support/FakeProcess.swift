@testable import CoalesceServer
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

/// A process the manager signals and inspects, in memory: it keeps the signals it was sent in order, and what they
/// did (SIGKILL ends it, SIGSTOP and SIGCONT stop and continue it). A pid no process can have (above Linux's
/// largest, 2^22), so that nothing the manager does reaches a real process.
final class FakeProcess: AppProcess {
    struct Condition {
        var alive = true
        var stopped = false
        var frozen = false
        var unit: String?
        var residentBytes = 1 << 20
        var signals: [CInt] = []
        /// Signals sent once it had ended, which reach nothing: a kill that is followed by anything shows here.
        var signalsAfterExit: [CInt] = []
    }

    let pid: Int32
    let condition: TestMutex<Condition>

    init(pid: Int32, unit: String? = nil, residentBytes: Int = 1 << 20) {
        precondition(pid > 1 << 22, "a pid no real process can have")
        self.pid = pid
        self.condition = TestMutex(Condition(unit: unit, residentBytes: residentBytes))
    }

    /// The signals sent, in order.
    var signals: [CInt] { self.condition.withLock { $0.signals } }

    /// The signals sent after it ended, in order.
    var signalsAfterExit: [CInt] { self.condition.withLock { $0.signalsAfterExit } }

    /// The process ends, as if it exited by itself.
    func exit() { self.condition.withLock { $0.alive = false } }

    @discardableResult
    func signal(_ sent: ProcessSignal) -> Bool {
        let signal = sent.number
        return self.condition.withLock { condition in
            guard condition.alive else {
                condition.signalsAfterExit.append(signal)
                return false
            }
            condition.signals.append(signal)
            switch signal {
            case SIGKILL: condition.alive = false
            case SIGSTOP: condition.stopped = true
            case SIGCONT: condition.stopped = false
            default: break
            }
            return true
        }
    }

    var isAlive: Bool { self.condition.withLock { $0.alive } }
    /// Its pid and the word "fake": the same process for as long as the value lives.
    var identity: String? { self.condition.withLock { $0.alive ? "fake \(self.pid)" : nil } }
    var isStopped: Bool { self.condition.withLock { $0.alive && $0.stopped } }
    var isFrozen: Bool { self.condition.withLock { $0.alive && $0.frozen } }
    func runs(in unit: String) -> Bool { self.condition.withLock { $0.alive && $0.unit == unit } }
    var residentBytes: Int? { self.condition.withLock { $0.alive ? $0.residentBytes : nil } }
}

/// The processes of a test, by pid: what a restart's take-up finds (``ProcessOpener``), and new pids for attaches.
final class FakeProcesses: Sendable {
    private let table = TestMutex<(byPid: [Int32: FakeProcess], next: Int32)>(([:], 1 << 30))

    /// A new process with a pid of its own.
    func spawn(unit: String? = nil, residentBytes: Int = 1 << 20) -> FakeProcess {
        self.table.withLock { table in
            let process = FakeProcess(pid: table.next, unit: unit, residentBytes: residentBytes)
            table.next += 1
            table.byPid[process.pid] = process
            return process
        }
    }

    func process(_ pid: Int32) -> FakeProcess? { self.table.withLock { $0.byPid[pid] } }

    /// Every process spawned, by pid.
    var all: [FakeProcess] { self.table.withLock { $0.byPid.sorted { $0.key < $1.key }.map(\.value) } }

    /// Opens a pid as the daemon does: found while the process is alive.
    var opener: ProcessOpener { ProcessOpener { pid in self.process(pid).flatMap { $0.isAlive ? $0 : nil } } }
}
