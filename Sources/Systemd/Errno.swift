#if canImport(Glibc)
import Glibc
#endif

/// The errno codes that callers of this module tell apart in a ``SystemdError`` or a ``FileError``, under the names
/// the manual pages give them, so that a caller reads what a call failed with without importing the C library (and
/// with it every call this module is the one place for).
public enum Errno {
    /// A signal interrupted the call; it is made again.
    public static let EINTR = Glibc.EINTR
    /// Nothing to read yet, or no resource for now.
    public static let EAGAIN = Glibc.EAGAIN
    /// The same as ``EAGAIN`` on Linux: a lock another holds.
    public static let EWOULDBLOCK = Glibc.EWOULDBLOCK
    public static let ENOMEM = Glibc.ENOMEM
    /// A timerfd's clock was set.
    public static let ECANCELED = Glibc.ECANCELED
    public static let ENOENT = Glibc.ENOENT
    public static let ENOTDIR = Glibc.ENOTDIR
    public static let EISDIR = Glibc.EISDIR
    public static let EEXIST = Glibc.EEXIST
    /// The file is larger than the reader accepts.
    public static let EFBIG = Glibc.EFBIG
    /// Bytes that are not the text they should be (invalid UTF-8).
    public static let EILSEQ = Glibc.EILSEQ
    /// No space left on the device.
    public static let ENOSPC = Glibc.ENOSPC
    /// The user's disk quota is used up.
    public static let EDQUOT = Glibc.EDQUOT
    /// No connection: no bus to make a call on.
    public static let ENOTCONN = Glibc.ENOTCONN
    /// A reply that is not what the call promises.
    public static let EBADMSG = Glibc.EBADMSG
}
