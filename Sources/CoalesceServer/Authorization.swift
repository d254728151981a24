import Systemd
import Varlink

/// Who may drive the system side: root, the daemon's own user (a user instance belongs to its user), and members
/// of the configured admin group. Decided from the kernel's word on the peer (SO_PEERCRED), never from anything
/// the peer says.
enum Authorization {
    static func isAdmin(_ peer: VarlinkPeer?, group: AdminGroup?) -> Bool {
        guard let peer else { return false }
        if peer.uid == 0 || peer.uid == CurrentProcess.effectiveUserID { return true }
        guard let group else { return false }
        if peer.gid == group.id { return true }
        return self.groups(of: peer).contains(group.id)
    }

    /// The caller's supplementary groups, the kernel's word: as it connected (SO_PEERGROUPS), else its process's
    /// now (/proc). Never a user-database lookup, which may be slow or remote, on the event loop.
    static func groups(of peer: VarlinkPeer) -> [UInt32] {
        peer.groups ?? ProcessHandle.connected(peer)?.groups ?? []
    }

    /// Throws `PermissionDenied` unless the peer is an admin.
    static func requireAdmin(_ peer: VarlinkPeer?, group: AdminGroup?) throws(VarlinkError) {
        guard self.isAdmin(peer, group: group) else { throw .permissionDenied }
    }
}

extension ProcessHandle {
    /// The process at the other end of a connection: its pidfd from SO_PEERPIDFD, or else one opened for its pid,
    /// kept only if that process belongs to the peer's user (a pid reused by someone else's process is not it).
    static func connected(_ peer: VarlinkPeer) -> ProcessHandle? {
        if let process = peer.process {
            return try? ProcessHandle(duplicating: process.descriptor, pid: peer.pid)
        }
        guard let handle = try? ProcessHandle(pid: peer.pid), handle.uid == peer.uid else { return nil }
        return handle
    }
}
