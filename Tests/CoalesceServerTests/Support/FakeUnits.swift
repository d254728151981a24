@testable import CoalesceServer
import Synchronization

/// systemd's answers about launch units (``UnitControl``), scripted: a refusal to freeze a unit, FreezeUnit and
/// ThawUnit failures to come. A freeze or thaw that succeeds freezes or thaws the unit's fake processes. Every call
/// is kept, in order, as "freeze UNIT" or "thaw UNIT".
final class FakeUnits: Sendable {
    struct Script {
        /// Why a unit must not be frozen, by unit.
        var refusals: [String: String] = [:]
        /// FreezeUnit calls to fail before one succeeds.
        var freezeFailures = 0
        /// ThawUnit calls to fail before one succeeds.
        var thawFailures = 0
        var calls: [String] = []
    }

    struct Refused: Error, CustomStringConvertible {
        var description: String
    }

    let script: TestMutex<Script>
    private let processes: FakeProcesses

    init(_ script: Script = Script(), processes: FakeProcesses) {
        self.script = TestMutex(script)
        self.processes = processes
    }

    /// The calls made, in order.
    var calls: [String] { self.script.withLock { $0.calls } }

    var control: UnitControl {
        UnitControl(
            freeze: { unit in try self.call("freeze", unit, frozen: true) },
            thaw: { unit in try self.call("thaw", unit, frozen: false) },
            refusal: { unit in self.script.withLock { $0.refusals[unit] } }
        )
    }

    private func call(_ method: String, _ unit: String, frozen: Bool) throws {
        try self.script.withLock { script in
            script.calls.append("\(method) \(unit)")
            if frozen, script.freezeFailures > 0 {
                script.freezeFailures -= 1
                throw Refused(description: "FreezeUnit \(unit) failed (scripted)")
            }
            if !frozen, script.thawFailures > 0 {
                script.thawFailures -= 1
                throw Refused(description: "ThawUnit \(unit) failed (scripted)")
            }
        }
        for process in self.processes.all where process.runs(in: unit) {
            process.condition.withLock { $0.frozen = frozen }
        }
    }
}
