import CoalesceTestSupport
import Foundation
import Varlink

/// A connection of the benchmark's own to sway's IPC socket (sway-ipc(7)), to send commands and read the tree as a
/// person's keys would, without a `swaymsg` process per command. Each message is the magic `i3-ipc`, its payload's
/// length and its type as 32-bit integers in the machine's order, then the payload, JSON. The connection subscribes
/// to nothing, so what it reads is only replies.
final class SwayCommandSocket {
    private static let magic = Array("i3-ipc".utf8)
    private static let headerLength = 14
    private static let runCommand: UInt32 = 0
    private static let getTree: UInt32 = 4

    private let descriptor: CInt
    private let path: String
    private let timeout: Duration

    /// Connects to sway's socket at `path`; a reply that takes longer than `timeout` fails its request.
    init(path: String, timeout: Duration) throws {
        self.path = path
        self.timeout = timeout
        self.descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.descriptor >= 0 else { throw SupportError("socket failed: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw SupportError("\(path): too long for a socket") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(self.descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(self.descriptor)
            throw SupportError("cannot connect to sway's IPC socket \(path): \(String(cString: strerror(errno)))")
        }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(self.descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(self.descriptor)
    }

    /// Sends `command` as RUN_COMMAND and reads sway's reply; throws unless every command in it succeeded.
    func run(_ command: String) throws {
        let reply = try self.request(Self.runCommand, command)
        let results = reply.arrayValue ?? []
        guard !results.isEmpty, results.allSatisfy({ $0["success"]?.boolValue == true }) else {
            throw SupportError("sway refused '\(command)': \(reply.jsonText)")
        }
    }

    /// The layout tree (GET_TREE).
    func tree() throws -> JSONValue {
        try self.request(Self.getTree, "")
    }

    /// The views of the tree (containers with an app_id and a pid): what a screen follower sees.
    func views() throws -> [JSONValue] {
        var views: [JSONValue] = []
        func collect(_ node: JSONValue) {
            if node["app_id"]?.stringValue != nil, node["pid"]?.intValue != nil { views.append(node) }
            for child in (node["nodes"]?.arrayValue ?? []) + (node["floating_nodes"]?.arrayValue ?? []) { collect(child) }
        }
        collect(try self.tree())
        return views
    }

    private func request(_ type: UInt32, _ payload: String) throws -> JSONValue {
        var message = Self.magic
        withUnsafeBytes(of: UInt32(payload.utf8.count)) { message += $0 }
        withUnsafeBytes(of: type) { message += $0 }
        message += Array(payload.utf8)
        let sent = message.withUnsafeBytes { send(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == message.count else { throw SupportError("cannot write to sway's IPC socket \(self.path)") }
        let header = try self.receive(Self.headerLength)
        guard header.prefix(6).elementsEqual(Self.magic) else { throw SupportError("sway's IPC sent a message without its magic") }
        let (length, replyType) = header.withUnsafeBytes {
            ($0.loadUnaligned(fromByteOffset: 6, as: UInt32.self), $0.loadUnaligned(fromByteOffset: 10, as: UInt32.self))
        }
        let body = try self.receive(Int(length))
        guard replyType == type else { throw SupportError("sway answered a request of type \(type) with type \(replyType)") }
        return try JSONParser.parse(body)
    }

    /// Exactly `count` bytes, each read waiting at most the timeout.
    private func receive(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress! + filled, count - filled, 0) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else {
                throw SupportError(
                    got == 0 ? "sway closed its IPC socket" : "sway did not answer on its IPC socket within \(self.timeout)"
                )
            }
            filled += got
        }
        return bytes
    }
}
