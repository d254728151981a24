#if canImport(Glibc)
import Glibc
#endif

/// Creates the directory at `path` and its missing parents (`mkdir -p`): the parents with mode 0755, the directory
/// itself with `permissions` when it creates it. A directory that exists keeps the mode it has, so that an
/// administrator's choice survives a start.
/// - Throws: ``FileError`` naming the first path that could not be made (a parent, when that is where it failed),
///   whose description is `path: reason`.
public func makeDirectories(_ path: String, permissions: UInt32) throws(FileError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    let components = path.split(separator: "/")
    for (index, component) in components.enumerated() {
        prefix += "/" + component
        let isLast = index == components.count - 1
        if mkdir(prefix, isLast ? permissions : 0o755) != 0, errno != EEXIST {
            throw FileError(operation: "mkdir", path: prefix, errno: errno)
        }
    }
}
