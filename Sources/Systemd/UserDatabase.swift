#if canImport(Glibc)
import Glibc
#endif

/// The user database (/etc/passwd, /etc/group and whatever NSS adds): a lookup may be slow or remote (LDAP, a
/// systemd-userdbd service), so it never runs on an event loop.
public enum UserDatabase {
    /// The id of the group `name`; `nil` when the database has no group of that name.
    public static func groupID(named name: String) -> UInt32? {
        getgrnam(name)?.pointee.gr_gid
    }

    /// The primary group of the user `uid`, and every group the user is in, that one included; `nil` for a uid the
    /// database does not know. The primary group alone when the list of groups cannot be had.
    public static func groups(ofUser uid: UInt32) -> (primary: UInt32, all: [UInt32])? {
        var buffer = [CChar](repeating: 0, count: 16384)
        // The entry's strings point into the buffer: it is used only inside this closure.
        return buffer.withUnsafeMutableBufferPointer { buffer -> (primary: UInt32, all: [UInt32])? in
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            guard getpwuid_r(uid, &entry, buffer.baseAddress!, buffer.count, &found) == 0, found != nil,
                let name = entry.pw_name
            else {
                return nil
            }
            var count: Int32 = 64
            var groups = [gid_t](repeating: 0, count: Int(count))
            // Too short a list fails, and says how long it must be.
            if getgrouplist(name, entry.pw_gid, &groups, &count) < 0 {
                groups = [gid_t](repeating: 0, count: Int(count))
                guard getgrouplist(name, entry.pw_gid, &groups, &count) >= 0 else {
                    return (entry.pw_gid, [entry.pw_gid])
                }
            }
            return (entry.pw_gid, Array(groups.prefix(Int(count))))
        }
    }
}
