import Systemd
import Varlink

/// Sway's IPC protocol (sway-ipc(7)): each message is the magic `i3-ipc`, its payload's length and its type as
/// 32-bit integers in the machine's order, then the payload, JSON.
enum SwayMessage {
    static let magic = Array("i3-ipc".utf8)
    static let headerLength = 14

    enum Request: UInt32 {
        case runCommand = 0
        case subscribe = 2
        case tree = 4
    }

    /// Events have the type's high bit set.
    static let eventBit: UInt32 = 0x8000_0000
    static let shutdownEvent: UInt32 = eventBit | 6

    static func encode(_ type: Request, _ payload: String = "") -> [UInt8] {
        var bytes = Self.magic
        withUnsafeBytes(of: UInt32(payload.utf8.count)) { bytes += $0 }
        withUnsafeBytes(of: type.rawValue) { bytes += $0 }
        return bytes + Array(payload.utf8)
    }

    /// The messages whole in `buffer`, taken off its front; what remains is the start of the next.
    /// - Throws: ``SwayError`` for bytes that are not sway's protocol.
    static func take(from buffer: inout [UInt8]) throws(SwayError) -> [(type: UInt32, payload: [UInt8])] {
        var messages: [(type: UInt32, payload: [UInt8])] = []
        var start = 0
        while buffer.count - start >= Self.headerLength {
            guard buffer[start..<start + 6].elementsEqual(Self.magic) else {
                throw SwayError("sway's IPC sent a message without its magic: not sway's socket?")
            }
            let length = Int(Self.integer(buffer, at: start + 6))
            let type = Self.integer(buffer, at: start + 10)
            guard buffer.count - start - Self.headerLength >= length else { break }
            let payload = Array(buffer[start + Self.headerLength..<start + Self.headerLength + length])
            messages.append((type, payload))
            start += Self.headerLength + length
        }
        buffer.removeFirst(start)
        return messages
    }

    private static func integer(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        var value: UInt32 = 0
        withUnsafeMutableBytes(of: &value) { raw in
            for index in 0..<4 { raw[index] = bytes[offset + index] }
        }
        return value
    }
}

struct SwayError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The windows of a sway session, followed through its IPC socket (`$SWAYSOCK`): one connection subscribed to the
/// events that change which windows there are and where (window, workspace; sway 1.7 has no output event, and
/// refuses a subscription that names one), another that reads the tree after them. An event says only that
/// something changed: the tree says what is so now.
final class SwayWindows: WindowSource {
    let source = "wayland"
    private let events: StreamSocket
    private let queries: StreamSocket
    private var eventBytes: [UInt8] = []
    private let timeout: Duration

    /// Connects twice to sway's socket at `path` and subscribes one connection to its events.
    init(path: String, timeout: Duration) throws {
        self.timeout = timeout
        self.events = try StreamSocket(path: path)
        self.queries = try StreamSocket(path: path)
        try self.events.write(SwayMessage.encode(.subscribe, #"["window","workspace","shutdown"]"#))
        let (type, payload) = try Self.reply(on: self.events, buffer: &self.eventBytes, timeout: timeout)
        guard type == SwayMessage.Request.subscribe.rawValue, try JSONParser.parse(payload)["success"] == true else {
            throw SwayError("sway refused the subscription to its window events: \(String(decoding: payload, as: UTF8.self))")
        }
    }

    var descriptor: CInt { self.events.descriptor }
    var deadline: ContinuousClock.Instant? { nil }

    func read() throws -> WindowNews {
        let bytes = try self.events.read()
        self.eventBytes += bytes
        let messages = try SwayMessage.take(from: &self.eventBytes)
        if messages.contains(where: { $0.type == SwayMessage.shutdownEvent }) { return .ended("sway is shutting down") }
        return messages.isEmpty ? .nothing : .changed
    }

    func deadlinePassed() -> WindowNews { .nothing }

    func windows() throws -> [SessionWindow] {
        try self.queries.write(SwayMessage.encode(.tree))
        var buffer: [UInt8] = []
        let (type, payload) = try Self.reply(on: self.queries, buffer: &buffer, timeout: self.timeout)
        guard type == SwayMessage.Request.tree.rawValue else { throw SwayError("sway answered GET_TREE with message type \(type)") }
        return SwayTree.windows(in: try JSONParser.parse(payload))
    }

    func focus(_ id: String) throws -> Bool {
        // Container ids are numbers: anything else cannot name one, and must not reach sway's command parser.
        guard let number = UInt64(id) else { return false }
        try self.queries.write(SwayMessage.encode(.runCommand, "[con_id=\(number)] focus"))
        var buffer: [UInt8] = []
        let (type, payload) = try Self.reply(on: self.queries, buffer: &buffer, timeout: self.timeout)
        guard type == SwayMessage.Request.runCommand.rawValue else { throw SwayError("sway answered RUN_COMMAND with message type \(type)") }
        return try JSONParser.parse(payload).arrayValue?.first?["success"] == true
    }

    /// The first message on `socket`, waiting at most `timeout` for it to come whole; what follows it in the same
    /// read is dropped.
    private static func reply(
        on socket: StreamSocket, buffer: inout [UInt8], timeout: Duration
    ) throws -> (type: UInt32, payload: [UInt8]) {
        let deadline = ContinuousClock.now + timeout
        while true {
            let messages = try SwayMessage.take(from: &buffer)
            // Events that follow a subscription's reply say only that something changed: the tree is read next.
            if let first = messages.first { return first }
            let left = deadline - ContinuousClock.now
            guard left > .zero, try socket.waitReadable(timeout: left) else {
                throw SwayError("sway did not answer on \(socket.path) within \(timeout)")
            }
            buffer += try socket.read()
        }
    }
}
