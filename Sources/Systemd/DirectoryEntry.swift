#if canImport(Glibc)
import Glibc
#endif

/// A name in a directory, apart from the file behind it: whether it is there, and moving it.
public enum DirectoryEntry {
    /// Whether anything is at `path` (a dangling link counts as nothing).
    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Gives the file at `path` the name `newPath`, in one step: a file already there is replaced (rename(2)).
    /// - Throws: ``FileError`` on `path` from `rename` (`ENOENT`, `EACCES`, `EXDEV` across file systems).
    public static func rename(_ path: String, to newPath: String) throws(FileError) {
        guard Glibc.rename(path, newPath) == 0 else { throw FileError(operation: "rename", path: path, errno: errno) }
    }
}
