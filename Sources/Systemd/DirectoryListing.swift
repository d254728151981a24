#if canImport(Glibc)
import Glibc
#endif

/// The names in a directory, as readdir(3) lists them.
public enum DirectoryListing {
    /// The names of the entries in `path`, in the order the file system lists them, `.` and `..` left out: bytes,
    /// as file names need not be UTF-8.
    ///
    /// - Important: The directory is open while it is read: listing `/proc/self/fd` counts the listing's own
    ///   descriptor.
    /// - Throws: ``SystemdError`` from `opendir` (`ENOENT`, `ENOTDIR`, `EACCES`).
    public static func names(in path: String) throws(SystemdError) -> [[UInt8]] {
        guard let handle = opendir(path) else { throw SystemdError(operation: "opendir(\(path))", errno: errno) }
        defer { closedir(handle) }
        var names: [[UInt8]] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != [UInt8(ascii: ".")], name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
        }
        return names
    }
}
