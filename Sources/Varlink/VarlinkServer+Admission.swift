import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Which connections are served: the quotas each is counted against when it is accepted, the refusals (named, and
/// logged at a bounded rate), and what happens when the process runs out of descriptors.
extension VarlinkServer {
    func initialize(_ channel: any Channel) -> EventLoopFuture<Void> {
        let limits = self.limits
        self.statistics.update { $0.connectionsTotal += 1 }
        if self.descriptors.tookSpare() {
            // This connection has the place of the spare descriptor: it is told why, and the spare is taken
            // again once it is closed.
            channel.closeFuture.whenComplete { [self] _ in self.descriptors.refill() }
            return self.refuse(channel, quota: .fileDescriptors(limit: Self.descriptorLimit()), peer: nil)
        }
        self.descriptorsRecovered()
        guard let provider = channel as? any SocketOptionProvider else {
            return self.admit(channel, peer: nil, limits: limits)
        }
        // On the channel's event loop, where the initializer runs, these complete at once.
        let credentials: EventLoopFuture<PeerCredentialsLayout> =
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        let groups: EventLoopFuture<VarlinkPeerGroups> =
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: Self.peerGroupsOption)
        return credentials.and(groups.map { Optional($0.groups) }.recover { _ in nil })
            .map { read -> VarlinkPeer? in
                let (credentials, groups) = read
                // More groups than the buffer holds (or an old kernel): the peer has none listed.
                return VarlinkPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
            }
            .recover { _ in nil }
            .flatMap { [self] peer in self.admit(channel, peer: peer, limits: limits) }
    }

    /// SO_PEERGROUPS (Linux 4.13).
    private static let peerGroupsOption = SocketOptionName(59)

    /// Counts the connection against the quotas and serves it, or refuses it.
    private func admit(_ channel: any Channel, peer: VarlinkPeer?, limits: VarlinkServerLimits) -> EventLoopFuture<Void> {
        let privileged = peer.map(self.isPrivileged) ?? false
        let ticket: VarlinkConnectionAdmission.Ticket
        switch self.admission.withLockedValue({ $0.admit(uid: peer?.uid, privileged: privileged, limits: limits) }) {
        case .failure(let refused): return self.refuse(channel, quota: refused.quota, peer: peer)
        case .success(let admitted): ticket = admitted
        }
        let id = ObjectIdentifier(channel)
        self.statistics.update { $0.connections += 1 }
        self.channels.withLockedValue { $0[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in
            self.channels.withLockedValue { _ = $0.removeValue(forKey: id) }
            self.admission.withLockedValue { $0.release(ticket) }
            self.statistics.update { $0.connections -= 1 }
            self.descriptors.refill()
        }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                VarlinkConnectionHandler(
                    service: self.service,
                    statistics: self.statistics,
                    calls: self.calls,
                    limits: limits,
                    peer: peer,
                    logger: self.logger
                )
            )
        }
    }

    /// Tells the peer which quota refuses it, then closes the connection.
    private func refuse(_ channel: any Channel, quota: VarlinkConnectionQuota, peer: VarlinkPeer?) -> EventLoopFuture<Void> {
        self.statistics.update { $0.connectionsRefused += 1 }
        self.logRefusal(quota, peer: peer)
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                VarlinkRefusingHandler(
                    error: VarlinkProtocolError.tooManyConnections(quota).varlinkError(in: self.service.protocolErrorInterface)
                )
            )
        }
    }

    /// Logs a refusal, rate-limited: past the burst of an interval refusals are counted, and the count is logged
    /// when the interval ends, so that a flood of connections cannot flood the journal.
    private func logRefusal(_ quota: VarlinkConnectionQuota, peer: VarlinkPeer?) {
        let limits = self.limits
        let decision = self.refusalLog.withLockedValue { log in
            if log.burst != limits.refusalLogBurst || log.interval != limits.refusalLogInterval.timeAmount {
                log = VarlinkLogRateLimit(interval: limits.refusalLogInterval.timeAmount, burst: limits.refusalLogBurst)
            }
            return log.entry(now: .now())
        }
        switch decision {
        case .log:
            var metadata: Logger.Metadata = ["quota": "\(quota.name)", "limit": "\(quota.limit)"]
            if let peer {
                metadata["uid"] = "\(peer.uid)"
                metadata["pid"] = "\(peer.pid)"
            }
            self.logger.warning("Refusing a connection", metadata: metadata)
        case .suppressFirst(let deadline):
            let interval = limits.refusalLogInterval
            // A loop that has shut down drops the task: the server is gone, and its count with it.
            self.group.next().scheduleTask(deadline: deadline) { [self] in
                let count = self.refusalLog.withLockedValue { $0.takeSuppressed() }
                guard count > 0 else { return }
                self.logger.warning(
                    "Refused more connections than were logged",
                    metadata: ["suppressed": "\(count)", "interval": "\(interval)"]
                )
            }
        case .suppress:
            break
        }
    }

    /// What the accept handler waits after an error before it accepts again; `nil`: at once. Out of descriptors,
    /// the spare is let go so that the next waiting connection can be accepted and told why it is refused; with
    /// no spare left, accepting waits a moment instead of failing again and again.
    func acceptBackoff(after error: IOError) -> TimeAmount? {
        switch error.errnoCode {
        case EMFILE, ENFILE:
            if self.descriptorsRanOut.withLockedValue({ ranOut in defer { ranOut = true }; return !ranOut }) {
                self.logger.warning(
                    "Out of file descriptors; refusing connections until some close. Raise LimitNOFILE= or lower MaxConnections=",
                    metadata: ["limit": "\(Self.descriptorLimit())", "connections": "\(self.statistics.snapshot.connections)"]
                )
            }
            return self.descriptors.release() ? .zero : .milliseconds(50)
        case ENOBUFS, ENOMEM:
            return .milliseconds(50)
        default:
            return nil
        }
    }

    /// A connection was accepted with the spare in hand: descriptors are there again.
    private func descriptorsRecovered() {
        guard self.descriptorsRanOut.withLockedValue({ ranOut in defer { ranOut = false }; return ranOut }) else { return }
        self.logger.notice(
            "File descriptors available again; accepting connections",
            metadata: ["connections": "\(self.statistics.snapshot.connections)"]
        )
    }

    /// The soft RLIMIT_NOFILE now.
    private static func descriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}
