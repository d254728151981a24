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
public struct InstancePaths: Sendable, Hashable {
    public var socket: String
    public var stateDirectory: String
    public var config: String

    /// The system instance's configuration file.
    public static let systemConfig = "/etc/coalesced/coalesced.conf"

    public init(instance: DaemonInstance) {
        switch instance {
        case .system:
            self.socket = "/run/coalesced/io.coalesced"
            self.stateDirectory = "/var/lib/coalesced"
            self.config = Self.systemConfig
        case .user:
            let home = Self.environment("HOME") ?? "/"
            let runtime = Self.environment("XDG_RUNTIME_DIR") ?? "/run/user/\(getuid())"
            let state = Self.environment("XDG_STATE_HOME") ?? home + "/.local/state"
            let config = Self.environment("XDG_CONFIG_HOME") ?? home + "/.config"
            self.socket = runtime + "/coalesced/io.coalesced"
            self.stateDirectory = state + "/coalesced"
            self.config = config + "/coalesced/coalesced.conf"
        }
    }

    private static func environment(_ name: String) -> String? {
        // The XDG specification says relative paths are invalid and must be ignored.
        guard let value = getenv(name).map({ String(cString: $0) }), value.hasPrefix("/") else { return nil }
        return value
    }
}
