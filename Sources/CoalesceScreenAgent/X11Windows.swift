import X11Session

/// The windows of an X11 session whose window manager keeps EWMH's properties (openbox, xfwm4, KWin, mutter…),
/// followed through one X connection: the root's `_NET_ACTIVE_WINDOW`, `_NET_CLIENT_LIST` and
/// `_NET_CURRENT_DESKTOP`, and on each client window its state, desktop, ICCCM state, title and class. A change to
/// any of them says only that something changed: the properties read then say what is so (``X11Screen``).
///
/// The process behind a window is the one the X server names (X-Resource), not the `_NET_WM_PID` the window carries,
/// which any client on the display may write.
final class X11Windows: WindowSource {
    let source = "x11"
    private let connection: X11Connection
    private var hold = ActiveWindowHold()
    /// Client windows whose events are asked for.
    private var followed: Set<UInt32> = []
    /// Events xcb read while it waited for answers: the descriptor will not signal them, so ``deadline`` is now.
    private var queuedNews = false

    /// Text read of a title or a class, at most: the daemon takes titles of 1,024 bytes.
    private static let maximumText = 4096
    /// Windows of `_NET_CLIENT_LIST` read, at most.
    private static let maximumClients = 4096

    /// Opens the display and asks for the root's property changes.
    /// - Parameters:
    ///   - display: as `DISPLAY` names it.
    ///   - timeout: how long an answer of the X server may take.
    init(display: String, timeout: Duration) throws {
        self.connection = try X11Connection(display: display, timeout: timeout)
        self.connection.select(.propertyChange, on: self.connection.root)
        let check = try self.connection.properties([
            Self.request(self.connection.root, self.connection.atoms.netSupportingWMCheck, X11Atoms.window, bytes: 4)
        ])
        // Not a failure: the agent may start before the window manager, whose lists it reads as soon as they come.
        if check[0] == nil {
            Log.note(
                "no EWMH window manager runs on \(display) yet (the root has no _NET_SUPPORTING_WM_CHECK): "
                    + "its windows are followed once one does"
            )
        }
        if !self.connection.namesProcesses {
            Log.problem(
                "the X server at \(display) lacks X-Resource 1.2: windows are reported without their process, "
                    + "so any client on the display can show a window as one of an app's"
            )
        }
    }

    var descriptor: CInt { self.connection.descriptor }

    var deadline: ContinuousClock.Instant? {
        self.queuedNews ? ContinuousClock.now : self.hold.deadline
    }

    func read() throws -> WindowNews {
        let events: [X11Event]
        do {
            // What xcb held queued comes first: read now.
            self.queuedNews = false
            events = try self.connection.read()
        } catch {
            // The server gone is the session's end, as sway's shutdown event is; anything else, a failure.
            guard error.kind == .closed else { throw error }
            return .ended("the X server at \(self.connection.display) closed the connection")
        }
        return events.contains(where: self.matters) ? .changed : .nothing
    }

    func deadlinePassed() -> WindowNews {
        let queued = self.queuedNews
        self.queuedNews = false
        let held = self.hold.deadlinePassed(now: ContinuousClock.now)
        return queued || held == .changed ? .changed : .nothing
    }

    func windows() throws -> [SessionWindow] {
        let atoms = self.connection.atoms
        let root = self.connection.root
        let rootValues = try self.connection.properties([
            Self.request(root, atoms.netClientList, X11Atoms.window, bytes: 4 * Self.maximumClients),
            Self.request(root, atoms.netActiveWindow, X11Atoms.window, bytes: 4),
            Self.request(root, atoms.netCurrentDesktop, X11Atoms.cardinal, bytes: 4),
        ])
        let list = rootValues[0]?.items ?? []
        let active = rootValues[1]?.items.first.flatMap { $0 == 0 ? nil : $0 }
        let currentDesktop = rootValues[2]?.items.first

        // Events first, then the reads: a change after the read is an event, not lost.
        for window in list where !self.followed.contains(window) {
            self.connection.select([.propertyChange, .structureNotify], on: window)
        }
        self.followed = Set(list)
        let perClient = 6
        var requests: [X11PropertyRequest] = []
        requests.reserveCapacity(list.count * perClient)
        for window in list {
            requests += [
                Self.request(window, X11Atoms.wmClass, X11Atoms.anyType, bytes: Self.maximumText),
                Self.request(window, atoms.netWMName, atoms.utf8String, bytes: Self.maximumText),
                Self.request(window, X11Atoms.wmName, X11Atoms.anyType, bytes: Self.maximumText),
                Self.request(window, atoms.netWMState, X11Atoms.atom, bytes: 4 * 64),
                Self.request(window, atoms.netWMDesktop, X11Atoms.cardinal, bytes: 4),
                Self.request(window, atoms.wmState, atoms.wmState, bytes: 8),
            ]
        }
        let values = try self.connection.properties(requests)
        let pids = try self.connection.processIDs(of: list)
        let clients = list.enumerated().map { index, window in
            let value = values[(index * perClient)..<((index + 1) * perClient)].map { $0 }
            return X11Screen.Client(
                window: window,
                appID: value[0].flatMap { wmClass in
                    X11Screen.appID(wmClass: wmClass.bytes, complete: wmClass.complete, utf8: wmClass.type == atoms.utf8String)
                },
                title: X11Screen.title(
                    netWMName: value[1]?.bytes, wmName: value[2]?.bytes, wmNameIsUTF8: value[2]?.type == atoms.utf8String
                ),
                states: value[3]?.items ?? [],
                desktop: value[4]?.items.first,
                wmState: value[5]?.items.first,
                pid: pids[index]
            )
        }
        let screen = X11Screen(
            clients: clients,
            active: self.hold.propertyRead(active, now: ContinuousClock.now),
            currentDesktop: currentDesktop,
            hiddenState: atoms.netWMStateHidden
        )
        self.queuedNews = self.connection.queuedEvents().contains(where: self.matters)
        return screen.windows
    }

    func focus(_ id: String) throws -> Bool {
        guard let window = X11Screen.window(id: id), self.followed.contains(window) else { return false }
        self.connection.requestActivation(of: window)
        return true
    }

    private static func request(_ window: X11ID, _ property: X11ID, _ type: X11ID, bytes: Int) -> X11PropertyRequest {
        X11PropertyRequest(window: window, property: property, type: type, maximumBytes: bytes)
    }

    /// Whether an event may change the windows: a property the report is made of, a window mapped, unmapped or
    /// destroyed. Not the many others (a window's `_NET_WM_USER_TIME` at each key press, a move).
    private func matters(_ event: X11Event) -> Bool {
        let atoms = self.connection.atoms
        switch event {
        case .propertyChanged(let window, let atom) where window == self.connection.root:
            return [atoms.netActiveWindow, atoms.netClientList, atoms.netCurrentDesktop].contains(atom)
        case .propertyChanged(_, let atom):
            return [atoms.netWMState, atoms.netWMDesktop, atoms.wmState, atoms.netWMName, X11Atoms.wmName, X11Atoms.wmClass]
                .contains(atom)
        case .mapped, .unmapped, .destroyed:
            return true
        case .other:
            return false
        }
    }
}
