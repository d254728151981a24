import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a connection, from the kernel (`SO_PEERCRED`), not from anything the peer said.
public struct VarlinkPeer: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The peer process itself (`SO_PEERPIDFD`, Linux 6.5 and later), where one was taken (``connectedProcess()``):
    /// the process that connected, even if its pid has been reused since.
    public var process: VarlinkPeerProcess?
    /// The connection, to take the peer's pidfd from when it is asked for.
    var processSource: VarlinkPeerProcessSource?
    /// The peer's supplementary groups when it connected (`SO_PEERGROUPS`), `nil` where the kernel could not say
    /// (more than ``VarlinkPeerGroups/capacity`` of them, or an old kernel).
    public var groups: [UInt32]?

    public init(pid: Int32, uid: UInt32, gid: UInt32, process: VarlinkPeerProcess? = nil, groups: [UInt32]? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.process = process
        self.groups = groups
    }

    /// Takes a pidfd of the process that connected, from the connection (`SO_PEERPIDFD`): the kernel keeps the
    /// process the connection was made by, so it is that process even if its pid has been reused since. `nil` where
    /// the kernel cannot say, or that process has ended. Each call opens a descriptor of its own.
    public func connectedProcess() async -> VarlinkPeerProcess? {
        await self.processSource?.take()
    }

    public static func == (lhs: VarlinkPeer, rhs: VarlinkPeer) -> Bool {
        lhs.pid == rhs.pid && lhs.uid == rhs.uid && lhs.gid == rhs.gid
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.pid)
        hasher.combine(self.uid)
        hasher.combine(self.gid)
    }
}

/// The buffer `SO_PEERGROUPS` fills. SwiftNIO reads a socket option into a zeroed value of fixed size and does not
/// say how many bytes the kernel wrote, so the count is recovered from the kernel's order: the list is sorted
/// ascending, so after the first entry every 0 is padding. (A peer whose only supplementary group is 0 therefore
/// reads as having none; its primary group is in SO_PEERCRED.)
struct VarlinkPeerGroups {
    static let capacity = 256
    var entries = InlineArray<256, UInt32>(repeating: 0)

    var groups: [UInt32] {
        var groups: [UInt32] = []
        for index in 0..<Self.capacity {
            let group = self.entries[index]
            // 0 sorts first: after the first entry it is padding, and as the first it counts only if a group follows.
            if group == 0, index > 0 || self.entries[1] == 0 { break }
            groups.append(group)
        }
        return groups
    }
}

/// Takes a connection's peer's pidfd.
final class VarlinkPeerProcessSource: Sendable {
    private let channel: any Channel

    init(channel: any Channel) {
        self.channel = channel
    }

    /// SO_PEERPIDFD (Linux 6.5), which Glibc 2.36's headers do not name yet.
    private static let peerPidfdOption = SocketOptionName(77)

    func take() async -> VarlinkPeerProcess? {
        guard let provider = self.channel as? any SocketOptionProvider else { return nil }
        // Fails on an older kernel, a closed connection, or a peer that has ended: then there is none.
        let descriptor: CInt? = try? await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: Self.peerPidfdOption
        ).get()
        guard let descriptor, descriptor >= 0 else { return nil }
        return VarlinkPeerProcess(descriptor: descriptor)
    }
}

/// A pidfd of a connection's peer, closed when the last reference goes.
public final class VarlinkPeerProcess: Sendable {
    public let descriptor: CInt

    init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    deinit {
        close(self.descriptor)
    }
}

/// One call as a method implementation sees it.
public struct VarlinkRequest: Sendable {
    public var call: VarlinkCall
    /// `nil` only when the kernel could not tell (not a Unix socket).
    public var peer: VarlinkPeer?
    /// The bytes of the call as it came, its terminating NUL left out: a bound on the size of any of its parameters.
    public var messageSize: Int

    public init(call: VarlinkCall, peer: VarlinkPeer?, messageSize: Int = 0) {
        self.call = call
        self.peer = peer
        self.messageSize = messageSize
    }

    /// A required string parameter.
    /// - Throws: `org.varlink.service.InvalidParameter` naming the parameter when it is missing or not a string.
    public func string(_ name: String) throws(VarlinkError) -> String {
        guard let value = self.call.parameters.string(name) else { throw .invalidParameter(name, reason: "expected a string") }
        return value
    }
}

/// How a method answers.
public enum VarlinkMethod: Sendable {
    /// Answers at once with one reply, on the connection's event loop: for cheap methods that never wait.
    case immediate(@Sendable (VarlinkRequest) throws -> JSONObject)
    /// Runs as a task and sends its replies through the responder: for methods that wait, or stream with `more`.
    /// Later calls on the connection wait until it has finished.
    case streaming(@Sendable (VarlinkRequest, VarlinkResponder) async throws -> Void)
    /// Starts on the connection's event loop, in call order, and answers later, from any thread, through the
    /// ``VarlinkPromisedReply`` (exactly once); later calls on the same connection start meanwhile, and replies
    /// still go out in call order. For methods that hand their work to something that answers many calls at once
    /// (a group commit, say) and must see calls in the order they came; throwing answers at once with the error.
    /// A method that has to wait in between starts its own task and answers from it.
    case deferred(@Sendable (VarlinkRequest, VarlinkPromisedReply) throws -> Void)
}

/// The one reply a ``VarlinkMethod/deferred(_:)`` call owes; it may be answered from any thread, once (later
/// answers are dropped).
public struct VarlinkPromisedReply: Sendable {
    private let owed: VarlinkOwedReply

    init(_ owed: VarlinkOwedReply) {
        self.owed = owed
    }

    public func succeed(_ parameters: JSONObject = [:]) { self.owed.answer(VarlinkReply(parameters: parameters)) }

    /// Answers with parameters written out ahead of time.
    public func succeed(_ parameters: VarlinkEncodedParameters) { self.owed.answer(VarlinkReply(parameters)) }

    public func fail(_ error: any Error) { self.owed.fail(error) }
}

/// An interface a service serves: its description and an implementation of every method it declares.
public struct VarlinkInterface: Sendable {
    public let description: VarlinkInterfaceDescription
    public let methods: [String: VarlinkMethod]
    /// By method, the parameters it receives as their text (``JSONValue/text(_:)``) rather than built into values.
    public let parametersKeptAsText: [String: [String]]

    /// - Parameter parametersKeptAsText: by method, the parameters a method passes on rather than reads (an
    ///   `object` it stores and forwards, say): they reach it as their text, checked but not built.
    /// - Important: The methods must be exactly those the description declares: an interface never advertises a
    ///   method that does not work, nor serves one it does not document. A mismatch is a programming error.
    public init(
        description: VarlinkInterfaceDescription,
        methods: [String: VarlinkMethod],
        parametersKeptAsText: [String: [String]] = [:]
    ) {
        precondition(
            Set(methods.keys) == description.methods,
            "\(description.name): declared \(description.methods.sorted()), implemented \(methods.keys.sorted())"
        )
        precondition(
            parametersKeptAsText.keys.allSatisfy(description.methods.contains),
            "\(description.name): parameters kept as text for undeclared methods"
        )
        self.description = description
        var checked: [String: VarlinkMethod] = [:]
        for (name, method) in methods {
            checked[name] = Self.checking(method, fields: description.parameters[name] ?? [], description.definitions)
        }
        self.methods = checked
        self.parametersKeptAsText = parametersKeptAsText
    }

    /// `method`, refusing first every call whose parameters are not of the types the interface declares for it, with
    /// `InvalidParameter` naming the parameter (its path, where nested) and why: the one place parameters are
    /// checked against the interface, so that a method reads only values of its declared types.
    private static func checking(
        _ method: VarlinkMethod,
        fields: [VarlinkField],
        _ definitions: [String: VarlinkType]
    ) -> VarlinkMethod {
        let parameters = VarlinkParameterCheck(fields: fields, definitions: definitions)
        @Sendable func check(_ request: VarlinkRequest) throws(VarlinkError) {
            if let mismatch = parameters.mismatch(request.call.parameters) {
                throw .invalidParameter(mismatch.path, reason: mismatch.reason)
            }
        }
        switch method {
        case .immediate(let body):
            return .immediate { request in
                try check(request)
                return try body(request)
            }
        case .streaming(let body):
            return .streaming { request, responder in
                try check(request)
                try await body(request, responder)
            }
        case .deferred(let body):
            return .deferred { request, reply in
                try check(request)
                try body(request, reply)
            }
        }
    }

    /// Convenience for interfaces whose text is known to be valid (it ships inside the binary).
    public init(text: String, methods: [String: VarlinkMethod], parametersKeptAsText: [String: [String]] = [:]) {
        do {
            self.init(
                description: try VarlinkInterfaceDescription(text: text),
                methods: methods,
                parametersKeptAsText: parametersKeptAsText
            )
        } catch {
            preconditionFailure("built-in interface text does not parse: \(error)")
        }
    }
}

/// What `org.varlink.service.GetInfo` says about the service.
public struct VarlinkServiceInfo: Sendable, Hashable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String

    public init(vendor: String, product: String, version: String, url: String) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
    }
}

/// The interfaces a server serves, `org.varlink.service` among them, and the routing of calls to them.
public struct VarlinkService: Sendable {
    public let info: VarlinkServiceInfo
    public let interfaces: [String: VarlinkInterface]
    /// The interface whose errors the server sends about the conversation itself (``VarlinkProtocolError``): a
    /// message too large, one that is not Varlink, a connection too many, a method's undeclared failure.
    /// Given by the product, which serves an interface of that name declaring them.
    public let protocolErrorInterface: String
    /// Every method by its qualified name: one lookup per call.
    private let methods: [String: VarlinkMethod]
    /// The parameters kept as text, by qualified method name (only the methods that keep some).
    private let parametersKeptAsText: [String: [String]]

    /// - Parameter protocolErrorInterface: the name the protocol errors are sent in, such as
    ///   `org.example.Protocol`; the service should serve an interface of that name that declares them.
    public init(info: VarlinkServiceInfo, interfaces: [VarlinkInterface], protocolErrorInterface: String) {
        self.info = info
        self.protocolErrorInterface = protocolErrorInterface
        var table: [String: VarlinkInterface] = [:]
        for interface in interfaces {
            precondition(table[interface.description.name] == nil, "\(interface.description.name) served twice")
            table[interface.description.name] = interface
        }
        let names = (Array(table.keys) + [VarlinkServiceInterface.name]).sorted()
        table[VarlinkServiceInterface.name] = VarlinkServiceInterface.make(info: info, interfaceNames: names) {
            [table] name in table[name]?.description.text
        }
        self.interfaces = table
        var methods: [String: VarlinkMethod] = [:]
        var texts: [String: [String]] = [:]
        for (name, interface) in table {
            for (method, implementation) in interface.methods { methods[name + "." + method] = implementation }
            for (method, parameters) in interface.parametersKeptAsText where !parameters.isEmpty {
                texts[name + "." + method] = parameters
            }
        }
        self.methods = methods
        self.parametersKeptAsText = texts
    }

    /// The parameters the method named `method` receives as their text.
    public func parametersKeptAsText(_ method: String) -> [String] {
        self.parametersKeptAsText.isEmpty ? [] : self.parametersKeptAsText[method] ?? []
    }

    /// The implementation a call goes to.
    /// - Throws: `InterfaceNotFound` or `MethodNotFound`, as the specification asks.
    public func method(for call: VarlinkCall) throws(VarlinkError) -> VarlinkMethod {
        if let method = self.methods[call.method] { return method }
        guard let interface = self.interfaces[call.interface] else {
            throw .interfaceNotFound(call.interface)
        }
        guard let method = interface.methods[call.methodName] else {
            throw .methodNotFound(call.method)
        }
        return method
    }
}
