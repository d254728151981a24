import Systemd
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Who may drive the system side: root, the daemon's own user (a user instance belongs to its user), and members
/// of the configured admin group. Decided from the kernel's word on the peer (SO_PEERCRED), never from anything
/// the peer says.
enum Authorization {
    static func isAdmin(_ peer: VarlinkPeer?, group: AdminGroup?) -> Bool {
        guard let peer else { return false }
        if peer.uid == 0 || peer.uid == geteuid() { return true }
        guard let group else { return false }
        if peer.gid == group.id { return true }
        return self.supplementaryGroups(of: peer.uid, primary: peer.gid).contains(group.id)
    }

    /// Throws `PermissionDenied` unless the peer is an admin.
    static func requireAdmin(_ peer: VarlinkPeer?, group: AdminGroup?) throws(VarlinkError) {
        guard self.isAdmin(peer, group: group) else { throw .permissionDenied }
    }

    /// The groups the user database gives `uid` (the process's own list is not in SO_PEERCRED).
    static func supplementaryGroups(of uid: UInt32, primary: UInt32) -> [UInt32] {
        // getpwuid_r: lookups run on several threads at once; the entry's strings live in `storage`.
        var storage = [CChar](repeating: 0, count: 16 * 1024)
        return storage.withUnsafeMutableBufferPointer { storage -> [UInt32] in
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            guard let base = storage.baseAddress, getpwuid_r(uid, &entry, base, storage.count, &found) == 0, found != nil,
                let name = entry.pw_name
            else { return [] }
            var count: Int32 = 64
            var groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, primary, &groups, &count) < 0 {
                groups = [gid_t](repeating: 0, count: Int(count))
                guard getgrouplist(name, primary, &groups, &count) >= 0 else { return [] }
            }
            return Array(groups.prefix(Int(count)))
        }
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
