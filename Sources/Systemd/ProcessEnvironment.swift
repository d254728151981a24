#if canImport(Glibc)
import Glibc
#endif

/// This process's environment variables, which the programs it starts inherit (a pager reads `$LESS`).
public enum ProcessEnvironment {
    /// The value of `name`; `nil` when it is not set.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Sets `name` to `value`; when `replacing` is false, a value already set is kept (the user's choice).
    public static func set(_ name: String, to value: String, replacing: Bool = true) {
        setenv(name, value, replacing ? 1 : 0)
    }
}
