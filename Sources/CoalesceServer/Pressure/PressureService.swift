import CoalesceCore
import ServiceLifecycle
import Varlink

/// Memory pressure as one of the daemon's services: its thread starts with the services and stops before the apps'
/// manager does, so that no purge or warning is decided while the daemon stops.
struct PressureService: Service {
    let monitor: PressureMonitor

    func run() async {
        self.monitor.start()
        try? await gracefulShutdown()
        self.monitor.stop()
    }
}

extension PressureMonitor {
    /// What Stats shows of memory pressure.
    var statsJSON: JSONValue {
        let status = self.snapshot
        var stats: JSONObject = [
            "mode": .string(status.mode.name),
            "file": .string(status.path),
            "warning": .string(status.warning.description),
            "critical": .string(status.critical.description),
            "level": .string(status.level.rawValue),
            "warnings": .int(Int64(status.warnings)),
            "purges": .int(Int64(status.purges)),
        ]
        if let reason = status.mode.reason { stats["reason"] = .string(reason) }
        if let reading = status.reading {
            stats["someAvg10"] = .double(reading.some.avg10)
            stats["fullAvg10"] = .double(reading.full.avg10)
        }
        return .object(stats)
    }
}
