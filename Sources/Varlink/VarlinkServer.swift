public import Logging
public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Where a server listens.
public enum VarlinkListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A socket file the server creates (and removes when it stops).
    case path(String)
    /// A listening socket handed over already bound, as systemd's socket activation does.
    case descriptor(CInt, path: String?)

    public var description: String {
        switch self {
        case .path(let path): return path
        case .descriptor(let fd, let path?): return "\(path) (fd \(fd) from socket activation)"
        case .descriptor(let fd, nil): return "fd \(fd) from socket activation"
        }
    }
}

/// Why a server could not start listening.
public enum VarlinkServerError: Error, Hashable, CustomStringConvertible {
    /// Another live process answers on the socket file.
    case alreadyServed(path: String)
    /// Something that is not a socket is in the way.
    case notASocket(path: String)
    /// The path is too long for a Unix socket address.
    case pathTooLong(path: String)
    /// A system call failed.
    case system(operation: String, path: String, errno: CInt)

    public var description: String {
        switch self {
        case .alreadyServed(let path):
            return "another instance is already serving \(path); stop it first or pass a different --socket"
        case .notASocket(let path):
            return "\(path) exists and is not a socket; remove it or pass a different --socket"
        case .pathTooLong(let path):
            return "socket path \(path) is longer than a Unix socket address allows (107 bytes)"
        case .system(let operation, let path, let code):
            return "\(operation) \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// A Varlink server on a Unix stream socket, built from SwiftNIO channel handlers.
///
/// ``start(_:socketMode:)`` binds the socket and accepts connections, which are served on the given event loop
/// group; immediate methods answer there. Streaming methods run as child tasks of ``run()``, which must be running
/// for them to start and returns once the server has stopped and every call it started has ended.
/// ``stop()`` or ``shutdown()`` stop it.
public final class VarlinkServer: Sendable {
    public let statistics: VarlinkServerStatistics
    let service: VarlinkService
    let group: any EventLoopGroup
    let logger: Logger
    private let limitsBox: NIOLockedValueBox<VarlinkServerLimits>
    let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    let calls = VarlinkCalls()
    private let listener = NIOLockedValueBox<(channel: any Channel, ownedPath: String?)?>(nil)
    let admission = NIOLockedValueBox(VarlinkConnectionAdmission())
    let isPrivileged: @Sendable (VarlinkPeer) -> Bool
    let refusalLog: NIOLockedValueBox<VarlinkLogRateLimit>
    let descriptors = VarlinkSpareDescriptor()
    /// Accepting failed for want of descriptors, and no connection was accepted normally since: logged once.
    let descriptorsRanOut = NIOLockedValueBox(false)

    /// - Parameters:
    ///   - isPrivileged: whether a peer may use the connections ``VarlinkServerLimits/reservedConnections`` keeps,
    ///     free of ``VarlinkServerLimits/maximumConnectionsPerUser``; asked once per connection, on its event loop.
    public init(
        service: VarlinkService,
        limits: VarlinkServerLimits,
        statistics: VarlinkServerStatistics = VarlinkServerStatistics(),
        group: any EventLoopGroup,
        logger: Logger,
        isPrivileged: @escaping @Sendable (VarlinkPeer) -> Bool = { $0.uid == 0 }
    ) {
        self.isPrivileged = isPrivileged
        self.refusalLog = NIOLockedValueBox(
            VarlinkLogRateLimit(interval: limits.refusalLogInterval.timeAmount, burst: limits.refusalLogBurst)
        )
        self.service = service
        self.statistics = statistics
        self.group = group
        self.logger = logger
        self.limitsBox = NIOLockedValueBox(limits)
    }

    /// The limits in force; setting them affects connections accepted afterwards.
    public var limits: VarlinkServerLimits {
        get { self.limitsBox.withLockedValue { $0 } }
        set { self.limitsBox.withLockedValue { $0 = newValue } }
    }

    /// Starts accepting connections.
    /// - Parameters:
    ///   - address: where to listen.
    ///   - socketMode: the permissions of a socket file the server creates: who may connect at all.
    /// - Throws: ``VarlinkServerError`` when the socket cannot be had, or the error of the bind.
    public func start(_ address: VarlinkListenAddress, socketMode: UInt32 = 0o666) async throws {
        let bootstrap = ServerBootstrap(group: self.group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        AcceptBackoffHandler(shouldForwardIOErrorCaught: false) { error in self.acceptBackoff(after: error) }
                    )
                }
            }
            .childChannelInitializer { [self] channel in
                self.initialize(channel)
            }
        let channel: any Channel
        var ownedPath: String?
        switch address {
        case .path(let path):
            try VarlinkSocketFile.prepare(path)
            channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
            if chmod(path, mode_t(socketMode)) != 0 {
                throw VarlinkServerError.system(operation: "chmod", path: path, errno: errno)
            }
            ownedPath = path
        case .descriptor(let fd, _):
            channel = try await bootstrap.withBoundSocket(fd).get()
        }
        self.listener.withLockedValue { $0 = (channel, ownedPath) }
    }

    /// Runs the streaming calls of every connection, each as a child task, until the server stops; then cancels
    /// those still running and returns once all have ended. Call it once.
    public func run() async {
        await self.calls.run()
    }

    /// Begins to stop without waiting: stops accepting, closes every connection, and lets ``run()`` end once the
    /// streaming calls have. ``shutdown()`` completes it.
    public func stop() {
        self.listener.withLockedValue { $0 }?.channel.close(promise: nil)
        for channel in self.channels.withLockedValue({ Array($0.values) }) {
            channel.close(promise: nil)
        }
        self.calls.finish()
    }

    /// Stops accepting, closes every connection, ends ``run()`` (which returns once the streaming calls have
    /// ended), and removes the socket file the server created.
    public func shutdown() async {
        guard let (listener, ownedPath) = self.listener.withLockedValue({ state in defer { state = nil }; return state })
        else { return self.calls.finish() }
        // Errors closing an already closed channel mean it is gone, which is what we want.
        try? await listener.close()
        let open = self.channels.withLockedValue { Array($0.values) }
        for channel in open {
            try? await channel.close()
        }
        self.calls.finish()
        if let ownedPath {
            unlink(ownedPath)
        }
    }
}

/// The socket file of a server that binds its own address.
enum VarlinkSocketFile {
    /// Makes `path` free to bind: removes a stale socket file that nobody answers on. Its directory must exist.
    /// - Throws: ``VarlinkServerError/alreadyServed(path:)`` when a live server answers there.
    static func prepare(_ path: String) throws {
        guard path.utf8.count < 108 else { throw VarlinkServerError.pathTooLong(path: path) }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw VarlinkServerError.system(operation: "stat", path: path, errno: errno)
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else { throw VarlinkServerError.notASocket(path: path) }
        if self.answers(path) { throw VarlinkServerError.alreadyServed(path: path) }
        if unlink(path) != 0, errno != ENOENT {
            throw VarlinkServerError.system(operation: "remove stale socket", path: path, errno: errno)
        }
    }

    /// Whether something accepts connections on the socket file.
    private static func answers(_ path: String) -> Bool {
        guard let connection = try? UnixSocket.connect(path: path) else { return false }
        close(connection)
        return true
    }
}

/// Says why a connection is refused as soon as it is active, then closes it.
final class VarlinkRefusingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let error: VarlinkError

    init(error: VarlinkError) {
        self.error = error
    }

    func channelActive(context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 128)
        buffer.writeVarlinkReply(VarlinkReply(error: self.error))
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Whatever the refused peer sends is not read.
    }
}
