import CoalesceTestSupport
import Foundation
import Varlink

/// A private session bus: a dbus-daemon of the test's own, with no service files (so nothing is ever activated
/// on it) and a policy that lets every connection own any name.
final class SessionBus: @unchecked Sendable {
    let directory: TemporaryDirectory
    /// Its D-Bus address, as dbus-daemon printed it.
    let address: String
    private let daemon: WatchedProcess

    init() throws {
        self.directory = try TemporaryDirectory()
        try self.directory.write(
            "bus.conf",
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(self.directory.file("bus"))</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        )
        self.daemon = try WatchedProcess(
            "/usr/bin/dbus-daemon",
            ["--config-file=\(self.directory.file("bus.conf"))", "--nofork", "--print-address=1"]
        )
        self.address = try self.daemon.waitForLine("unix:path=")
    }

    /// Ends the bus, as the end of the graphical session does.
    func stop() {
        self.daemon.child.signal(SIGTERM)
        _ = self.daemon.child.wait(timeout: .seconds(10))
    }

    /// Whether a connection owns `name` now.
    func hasOwner(_ name: String) throws -> Bool {
        let run = try runProcess("/usr/bin/busctl", [
            "--address=\(self.address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "NameHasOwner", "s", name,
        ])
        guard run.status == 0 else { throw SupportError("busctl NameHasOwner failed: \(run.stderr)") }
        return run.stdout.contains("true")
    }

    /// Runs gdbus against this bus; throws with its output when it fails.
    @discardableResult
    func gdbus(_ arguments: [String]) throws -> String {
        let run = try runProcess("/usr/bin/gdbus", [arguments[0], "--address", self.address] + arguments.dropFirst())
        guard run.status == 0 else { throw SupportError("gdbus \(arguments.joined(separator: " ")) failed: \(run.stderr)") }
        return run.stdout
    }
}

/// python-dbusmock's notification_daemon template on a ``SessionBus``: org.freedesktop.Notifications whose
/// every call is written to a log, and whose signals the test emits through org.freedesktop.DBus.Mock.
final class NotificationServerMock: @unchecked Sendable {
    let bus: SessionBus
    let logPath: String
    private let process: WatchedProcess

    /// Starts the mock and waits for it to own the name. `capabilities` replaces the template's own list.
    init(on bus: SessionBus, capabilities: [String]? = nil) throws {
        self.bus = bus
        self.logPath = bus.directory.file("mock-\(UUID().uuidString.prefix(8)).log")
        var arguments = ["-m", "dbusmock", "--template", "notification_daemon", "-l", self.logPath]
        if let capabilities {
            arguments += ["-p", JSONValue.object(["capabilities": .string(capabilities.joined(separator: " "))]).jsonText]
        }
        // Debian's python3 has the dbus and gi modules python3-dbusmock needs.
        self.process = try WatchedProcess("/usr/bin/python3", arguments, environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
        try waitUntil("the notification mock to own org.freedesktop.Notifications", poll: .milliseconds(50)) {
            if self.process.child.hasEnded {
                throw SupportError("the mock ended: \(self.process.output.joined(separator: "\n"))")
            }
            return try bus.hasOwner("org.freedesktop.Notifications")
        }
    }

    /// The calls it has logged, one each: `1795745851.960 Notify "app" 0 "" "title" "body" [...] {...} -1`. An entry
    /// starts with its time; a line that does not is a newline inside an argument, kept as one.
    var log: [String] {
        let text = (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
        var entries: [String] = []
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        for line in text.hasSuffix("\n") ? lines.dropLast() : lines[...] {
            let time = line.prefix(while: { $0.isNumber || $0 == "." })
            if !time.isEmpty, line.dropFirst(time.count).hasPrefix(" ") || entries.isEmpty {
                entries.append(String(line))
            } else if !entries.isEmpty {
                entries[entries.count - 1] += "\n" + line
            }
        }
        return entries.filter { !$0.isEmpty }
    }

    /// The logged Notify calls.
    var notifyCalls: [String] { self.log.filter { $0.contains(" Notify ") } }

    /// Emits a signal of org.freedesktop.Notifications from the mock (so from the name's owner); `arguments` are
    /// GVariant text, such as `<uint32 1>`.
    func emit(_ member: String, signature: String, _ arguments: [String]) throws {
        try self.bus.gdbus([
            "call", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
            "-m", "org.freedesktop.DBus.Mock.EmitSignal", "org.freedesktop.Notifications", member, signature,
            "[\(arguments.joined(separator: ", "))]",
        ])
    }

    /// Replaces a method's code (Python, with `args` and `ret`), as `time.sleep(5); ret = 1` for a stuck server.
    func replaceMethod(_ name: String, signature: String, returns: String, code: String) throws {
        try self.bus.gdbus([
            "call", "-d", "org.freedesktop.Notifications", "-o", "/org/freedesktop/Notifications",
            "-m", "org.freedesktop.DBus.Mock.AddMethod", "org.freedesktop.Notifications", name, signature, returns, code,
        ])
    }

    /// Ends the mock and waits until it is off the bus.
    func stop() throws {
        self.process.child.signal(SIGTERM)
        _ = self.process.child.wait(timeout: .seconds(10))
        try waitUntil("the notification mock to leave the bus", poll: .milliseconds(50)) {
            try !self.bus.hasOwner("org.freedesktop.Notifications")
        }
    }
}

/// The daemon's side of io.coalesced.Notifications as the agent uses it, over a real Unix socket: Presentations
/// streams what the test hands ``present(_:)``, Respond is recorded. Blocking threads, one per connection.
final class FakePresentationsDaemon: @unchecked Sendable {
    let path: String
    private let state: State

    /// What the threads share. A descriptor is closed only by its own thread, under the lock and after it left the
    /// sets, so that a shutdown never reaches a number the process has reused for another test's socket.
    private final class State: @unchecked Sendable {
        let condition = NSCondition()
        let listener: CInt
        var connections: Set<CInt> = []
        var streams: Set<CInt> = []
        var responses: [JSONObject] = []
        var streamCalls = 0
        var stopped = false
        var listenerClosed = false
        var early: JSONObject?
        /// A presentation sent in the same write as the first reply, right behind it.
        var withFirst: JSONObject?

        init(listener: CInt) { self.listener = listener }
    }

    init(path: String) throws {
        self.path = path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw SupportError("socket: \(String(cString: strerror(errno)))") }
        do {
            try bindUnixSocket(listener, path: path)
            guard listen(listener, 16) == 0 else { throw SupportError("listen: \(String(cString: strerror(errno)))") }
        } catch {
            close(listener)
            throw error
        }
        let state = State(listener: listener)
        self.state = state
        Thread.detachNewThread {
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0, errno == EINTR { continue }
                let open = state.condition.withLock { () -> Bool in
                    guard fd >= 0, !state.stopped else { return false }
                    state.connections.insert(fd)
                    return true
                }
                guard open else {
                    if fd >= 0 { close(fd) }
                    // Closed here, by the thread that accepts on it, once it no longer does.
                    state.condition.withLock {
                        state.listenerClosed = true
                        _ = close(listener)
                    }
                    return
                }
                Self.serve(fd, state)
            }
        }
    }

    deinit {
        self.stop()
    }

    /// Closes the socket and every connection: the daemon is gone.
    func stop() {
        self.state.condition.withLock {
            guard !self.state.stopped else { return }
            self.state.stopped = true
            if !self.state.listenerClosed { shutdown(self.state.listener, Int32(SHUT_RDWR)) }
            unlink(self.path)
            for fd in self.state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Ends every Presentations stream, as a daemon restart does, and keeps listening.
    func dropStreams() {
        self.state.condition.withLock {
            for fd in self.state.streams { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// A presentation each Presentations stream gets ahead of its first reply, as one made while the daemon
    /// registered the agent may come.
    func presentAheadOfTheFirstReply(_ presentation: JSONObject) {
        self.state.condition.withLock { self.state.early = presentation }
    }

    /// A presentation each Presentations stream gets right behind its first reply, in the same write, as one made
    /// just after the daemon registered the agent may come in one read with it.
    func presentWithTheFirstReply(_ presentation: JSONObject) {
        self.state.condition.withLock { self.state.withFirst = presentation }
    }

    /// How many Presentations calls have come.
    var presentationsCalls: Int { self.state.condition.withLock { self.state.streamCalls } }

    /// How many Presentations streams are open.
    var openStreams: Int { self.state.condition.withLock { self.state.streams.count } }

    /// The parameters of each Respond call so far.
    var responded: [JSONObject] { self.state.condition.withLock { self.state.responses } }

    /// Sends a presentation down every open stream.
    func present(_ presentation: JSONObject) {
        let frame = Self.frame(["parameters": ["presentation": .object(presentation)], "continues": true])
        self.state.condition.withLock {
            for fd in self.state.streams { Self.send(frame, fd) }
        }
    }

    private static func serve(_ fd: CInt, _ state: State) {
        Thread.detachNewThread {
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            defer {
                state.condition.withLock {
                    state.connections.remove(fd)
                    state.streams.remove(fd)
                    close(fd)
                }
            }
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return }
                buffer += chunk[..<count]
                while let nul = buffer.firstIndex(of: 0) {
                    let message = try? JSONParser.parse(buffer[..<nul])
                    buffer.removeSubrange(...nul)
                    Self.answer(message?.objectValue ?? [:], on: fd, state)
                }
            }
        }
    }

    private static func answer(_ call: JSONObject, on fd: CInt, _ state: State) {
        state.condition.withLock {
            switch call.string("method") {
            case "io.coalesced.Notifications.Presentations":
                // Under the lock, so that the first reply goes out before any presentation, unless the test asked
                // for one ahead of it.
                if let early = state.early {
                    Self.send(Self.frame(["parameters": ["presentation": .object(early)], "continues": true]), fd)
                }
                var first = Self.frame(["parameters": [:], "continues": true])
                if let behind = state.withFirst {
                    first += Self.frame(["parameters": ["presentation": .object(behind)], "continues": true])
                }
                Self.send(first, fd)
                state.streams.insert(fd)
                state.streamCalls += 1
            case "io.coalesced.Notifications.Respond":
                state.responses.append(call["parameters"]?.objectValue ?? [:])
                Self.send(Self.frame(["parameters": [:]]), fd)
            default:
                let method = JSONValue.string(call.string("method") ?? "")
                Self.send(Self.frame(["error": "org.varlink.service.MethodNotFound", "parameters": ["method": method]]), fd)
            }
        }
    }

    private static func send(_ frame: [UInt8], _ fd: CInt) {
        _ = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private static func frame(_ object: JSONObject) -> [UInt8] {
        Array(JSONValue.object(object).jsonText.utf8) + [0]
    }
}

/// A presentation as io.coalesced.Notifications.Presentations sends it.
func presentation(
    app: String = "org.example.mail",
    id: String,
    title: String,
    subtitle: String? = nil,
    body: String? = nil,
    threadId: String? = nil,
    actions: [(id: String, title: String)] = [],
    style: String = "banner"
) -> JSONObject {
    var content: JSONObject = ["title": .string(title)]
    if let subtitle { content["subtitle"] = .string(subtitle) }
    if let body { content["body"] = .string(body) }
    if let threadId { content["threadId"] = .string(threadId) }
    if !actions.isEmpty {
        content["actions"] = .array(actions.map { ["id": .string($0.id), "title": .string($0.title)] })
    }
    return [
        "app": .string(app), "id": .string(id), "serial": 1, "content": .object(content), "style": .string(style),
        "date": .double(Date().timeIntervalSince1970), "count": 1, "late": false,
    ]
}
