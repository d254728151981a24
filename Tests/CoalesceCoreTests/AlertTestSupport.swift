import CoalesceCore

let clockApp = try! AppName("org.example.clock")
let mailApp = try! AppName("org.example.mail")

/// The clocks at a UTC wall time, with the boot-time clock at `boot` seconds.
func reading(_ text: String, boot: Int64 = 1_000) -> ClockReading {
    ClockReading(wall: utc(text), boot: BootTime(nanoseconds: boot * 1_000_000_000))
}

func request(
    _ id: String, _ trigger: AlertTrigger, late: LatePolicy = .coalesce, thread: String? = nil, title: String? = nil
) -> AlertRequest {
    AlertRequest(id: id, trigger: trigger, content: AlertContent(title: title ?? id, threadID: thread), late: late)
}

extension [AlertAction] {
    var presented: [AlertPresentation] { self.compactMap { if case .present(let value) = $0 { value } else { nil } } }
    var drops: [AlertDrop] { self.compactMap { if case .dropped(let value) = $0 { value } else { nil } } }
    var kept: [AlertRecord] { self.compactMap { if case .keep(let value) = $0 { value } else { nil } } }
    var forgotten: [AlertKey] { self.compactMap { if case .forget(let value) = $0 { value } else { nil } } }
    var armed: (wall: WallTime?, boot: BootTime?)? {
        guard case .arm(let wall, let boot) = self.last else { return nil }
        return (wall, boot)
    }
}
