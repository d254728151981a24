import CoalesceCore
import Logging
import Synchronization
import Systemd

/// The screen lock of a seat's active session: logind's `LockedHint`, which the session's locker sets
/// (SetLockedHint) once the screen is really locked. Lock and Unlock signals are only requests to the locker
/// (org.freedesktop.login1(5)), so they are not followed. The seat's `ActiveSession` says which session that is; a
/// switch of session is followed too, and a seat with no active session counts as unlocked.
///
/// The lock interrupts the apps on screen (willResignActive … didBecomeActive, `[System] LockInterrupts=`); running
/// apps hear protectedDataWillBecomeUnavailable on lock and protectedDataDidBecomeAvailable on unlock, suspended ones
/// the net change on their wake (``AppManager/screenLockChanged(locked:)``).
final class LockFollower: Sendable {
    struct Snapshot: Sendable {
        var seat: String
        var session: String?
        var locked = false
        var problem: String?
    }

    private struct State {
        var snapshot: Snapshot
        /// The active session's object path.
        var sessionPath: String?
        var subscriptions: [BusSubscription] = []
    }

    private let bus: BusConnection
    private let apps: AppManager
    private let logger: Logger
    private let seatPath: String
    private let state: Mutex<State>
    private let changes: AsyncStream<Void>
    private let changeSink: AsyncStream<Void>.Continuation

    init(bus: BusConnection, seat: String, apps: AppManager, logger: Logger) {
        self.bus = bus
        self.apps = apps
        self.logger = logger
        self.seatPath = "/org/freedesktop/login1/seat/" + Self.escapedPathLabel(seat)
        self.state = Mutex(State(snapshot: Snapshot(seat: seat)))
        (self.changes, self.changeSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var snapshot: Snapshot { self.state.withLock { $0.snapshot } }

    func run() async {
        let sink = self.changeSink
        do {
            // Any login1 object's properties: the seat's ActiveSession, and the LockedHint of whichever session is
            // active now, without a new match at each switch.
            let subscription = try await self.bus.subscribe(.propertiesChanged(sender: SleepFollower.login1, path: nil)) { [weak self] signal in
                guard let self else { return }
                let interface = signal.arguments.first?.stringValue
                let relevant = self.state.withLock { state in
                    (interface == "org.freedesktop.login1.Seat" && signal.path == self.seatPath)
                        || (interface == "org.freedesktop.login1.Session" && signal.path == state.sessionPath)
                }
                if relevant { sink.yield() }
            }
            self.state.withLock { $0.subscriptions.append(subscription) }
        } catch {
            self.fail("The screen lock is not followed: \(error)")
            return
        }
        self.bus.onReconnect { sink.yield() }
        sink.yield()
        for await _ in self.changes {
            await self.refresh()
        }
    }

    func stop() {
        let subscriptions = self.state.withLock { $0.subscriptions }
        for subscription in subscriptions { subscription.cancel() }
        self.changeSink.finish()
    }

    /// Reads the seat's active session and its LockedHint, and tells the apps when the lock changed.
    private func refresh() async {
        let session: (id: String, path: String)?
        do {
            let active = try await self.bus.property(
                destination: SleepFollower.login1, path: self.seatPath, interface: "org.freedesktop.login1.Seat",
                name: "ActiveSession", timeout: .seconds(5)
            )
            if let members = active.structureValue, members.count == 2, let id = members[0].stringValue,
                let path = members[1].stringValue, !id.isEmpty, path != "/"
            {
                session = (id, path)
            } else {
                session = nil
            }
        } catch {
            self.fail("The screen lock of \(self.snapshot.seat) is not followed: \(error)")
            return
        }
        var locked = false
        if let session {
            do {
                locked = try await self.bus.property(
                    destination: SleepFollower.login1, path: session.path, interface: "org.freedesktop.login1.Session",
                    name: "LockedHint", timeout: .seconds(5)
                ).boolValue ?? false
            } catch {
                self.fail("Cannot read the LockedHint of session \(session.id): \(error)")
                return
            }
        }
        let changed = self.state.withLock { state -> Bool in
            state.sessionPath = session?.path
            state.snapshot.session = session?.id
            state.snapshot.problem = nil
            defer { state.snapshot.locked = locked }
            return state.snapshot.locked != locked
        }
        guard changed else { return }
        let told = self.apps.screenLockChanged(locked: locked)
        self.logger.notice(
            "The screen of \(self.snapshot.seat) is \(locked ? "locked" : "unlocked") (session \(session?.id ?? "none")): \(told) running \(told == 1 ? "app" : "apps") told",
            metadata: [
                "message_id": "\(MessageID.lockChanged)", "seat": "\(self.snapshot.seat)",
                "session": "\(session?.id ?? "")", "locked": "\(locked)",
            ]
        )
    }

    private func fail(_ message: String) {
        self.state.withLock { $0.snapshot.problem = message }
        self.logger.warning("\(message)")
    }

    /// A name as sd-bus escapes it into an object path label (`bus_label_escape`): letters, and digits past the
    /// first byte, stay; any other byte is `_` and two hex digits.
    static func escapedPathLabel(_ name: String) -> String {
        var label = ""
        for byte in name.utf8 {
            let isLetter = (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            let isDigit = byte >= 0x30 && byte <= 0x39
            if isLetter || (isDigit && !label.isEmpty) {
                label.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16)
                label += "_" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return label.isEmpty ? "_" : label
    }
}
