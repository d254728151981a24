#if canImport(Glibc)
import Glibc
#endif

/// Where an instance keeps its socket, state and configuration by default: the system instance in the places
/// coalesced.service sets up (RuntimeDirectory=, StateDirectory=), a user instance in the XDG base directories.
public struct InstancePaths: Sendable, Hashable {
    public var socket: String
    public var stateDirectory: String
    public var config: String

    public init(instance: DaemonInstance) {
        switch instance {
        case .system:
            self.socket = "/run/coalesced/io.coalesced"
            self.stateDirectory = "/var/lib/coalesced"
            self.config = ConfigurationLoader.systemPath
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
