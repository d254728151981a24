#if canImport(Glibc)
import Glibc
#endif

/// Which instance runs: the system one (root, /run and /var/lib) or a user's (XDG directories).
public enum DaemonInstance: String, Sendable {
    case system
    case user

    /// The instance a command line names with `--system` or `--user`; naming neither, root's is the system one and
    /// anyone else's their own. The daemon and coalescectl decide alike, so that both find the same socket.
    public init(system: Bool, user: Bool) {
        if system {
            self = .system
        } else if user {
            self = .user
        } else {
            self = geteuid() == 0 ? .system : .user
        }
    }
}

/// Where an instance keeps its socket, state and configuration by default: the system instance in the places
/// coalesced.service sets up (RuntimeDirectory=, StateDirectory=), a user instance in the XDG base directories.
///
/// The daemon and coalescectl both ask here, so that `coalesced --user` and `coalescectl --user` agree on the
/// socket, and refuse alike when a user instance has no runtime directory.
public struct InstancePaths: Sendable, Hashable {
    /// The directory the socket is in, `nil` for a user instance when `XDG_RUNTIME_DIR` is unset (or relative).
    /// There is no guess: `/run/user/UID` exists only while the user has a login session, and a session's
    /// `XDG_RUNTIME_DIR` names it anyway, which is what systemd's own `systemctl --user` expects too.
    public var runtimeDirectory: String?
    public var stateDirectory: String
    public var config: String

    /// The system instance's socket, which coalesced.socket listens on.
    public static let systemSocket = "/run/coalesced/io.coalesced"

    /// The system instance's configuration file.
    public static let systemConfig = "/etc/coalesced/coalesced.conf"

    public init(instance: DaemonInstance) {
        switch instance {
        case .system:
            self.runtimeDirectory = "/run/coalesced"
            self.stateDirectory = "/var/lib/coalesced"
            self.config = Self.systemConfig
        case .user:
            let home = Self.environment("HOME") ?? "/"
            let state = Self.environment("XDG_STATE_HOME") ?? home + "/.local/state"
            let config = Self.environment("XDG_CONFIG_HOME") ?? home + "/.config"
            self.runtimeDirectory = Self.environment("XDG_RUNTIME_DIR").map { $0 + "/coalesced" }
            self.stateDirectory = state + "/coalesced"
            self.config = config + "/coalesced/coalesced.conf"
        }
    }

    /// The instance's socket.
    /// - Throws: ``NoRuntimeDirectory`` for a user instance without `XDG_RUNTIME_DIR`.
    public var socket: String {
        get throws(NoRuntimeDirectory) {
            guard let runtimeDirectory else { throw NoRuntimeDirectory() }
            return runtimeDirectory + "/io.coalesced"
        }
    }

    private static func environment(_ name: String) -> String? {
        // The XDG specification says relative paths are invalid and must be ignored.
        guard let value = getenv(name).map({ String(cString: $0) }), value.hasPrefix("/") else { return nil }
        return value
    }
}

/// A user instance's socket lives in `$XDG_RUNTIME_DIR`, and it is unset.
public struct NoRuntimeDirectory: Error, Sendable, CustomStringConvertible {
    public init() {}

    public var description: String {
        "XDG_RUNTIME_DIR is not set, so a user instance has no socket; pass --socket PATH, or set XDG_RUNTIME_DIR "
            + "(a login session sets it to /run/user/$UID)"
    }
}
