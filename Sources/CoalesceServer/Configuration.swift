public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings, from `coalesced.conf` and its drop-ins.
public struct Configuration: Sendable, Hashable {
    /// `[Daemon] LogLevel=`: the least severe level logged.
    public var logLevel: Logger.Level = .info
    /// `[Varlink] MaxMessageSize=`: the largest message a client may send, in bytes.
    public var maxMessageSize: Int = 1 << 20
    /// `[Varlink] MaxConnections=`: connections served at once.
    public var maxConnections: Int = 4096
    /// `[Daemon] AdminGroup=`: members of this group may call the System interface, besides root and the
    /// daemon's own user. Resolved to its id when the configuration is read.
    public var adminGroup: AdminGroup?
    /// `[Apps] MaxApps=`: how many apps may be registered.
    public var maxApps: Int = 65536

    public init() {}
}

/// A group named in the configuration, with the id it had when the configuration was read.
public struct AdminGroup: Sendable, Hashable {
    public var name: String
    public var id: UInt32
}

/// A configuration file's text and where it came from, for error messages.
public struct ConfigurationSource: Sendable, Hashable {
    public var path: String
    public var text: String

    public init(path: String, text: String) {
        self.path = path
        self.text = text
    }
}

/// Why a configuration cannot be used, with the file and line to fix.
public struct ConfigurationError: Error, Hashable, CustomStringConvertible {
    public var path: String
    /// 1-based; 0 when the problem is the file as a whole.
    public var line: Int
    public var reason: String

    public init(path: String, line: Int, reason: String) {
        self.path = path
        self.line = line
        self.reason = reason
    }

    public var description: String {
        self.line > 0 ? "\(self.path):\(self.line): \(self.reason)" : "\(self.path): \(self.reason)"
    }
}

extension Configuration {
    /// Reads settings in the systemd style: `[Section]` headers, `Key=Value` lines, `#` and `;` comments, later
    /// assignments overriding earlier ones, and an empty value restoring the default. Sources apply in order, so
    /// pass the main file first and then the drop-ins sorted by file name.
    /// - Throws: ``ConfigurationError`` for the first unknown section, unknown key or bad value, with its line.
    public static func parse(_ sources: [ConfigurationSource]) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration()
        for source in sources {
            var section: String?
            for (offset, rawLine) in source.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let lineNumber = offset + 1
                let line = rawLine.trimmingWhitespace()
                if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
                func fail(_ reason: String) -> ConfigurationError {
                    ConfigurationError(path: source.path, line: lineNumber, reason: reason)
                }
                if line.hasPrefix("[") {
                    guard line.hasSuffix("]"), line.count > 2 else { throw fail("malformed section header '\(line)'") }
                    let name = String(line.dropFirst().dropLast())
                    guard ConfigurationKey.sections.contains(name) else {
                        throw fail("unknown section [\(name)]; known sections: \(ConfigurationKey.sectionList)")
                    }
                    section = name
                    continue
                }
                guard let equals = line.firstIndex(of: "=") else {
                    throw fail("expected Key=Value, got '\(line)'")
                }
                let key = String(line[..<equals]).trimmingWhitespace()
                let value = String(line[line.index(after: equals)...]).trimmingWhitespace()
                guard let section else { throw fail("assignment to \(key) outside of any [Section]") }
                guard let setting = ConfigurationKey.all[section]?[key] else {
                    let known = ConfigurationKey.all[section]!.keys.sorted().joined(separator: ", ")  // section is known
                    throw fail("unknown key '\(key)' in [\(section)]; known keys: \(known)")
                }
                do {
                    try setting(&configuration, value)
                } catch {
                    throw fail("bad value '\(value)' for \(key)=: \(error.reason)")
                }
            }
        }
        return configuration
    }
}

/// Why a value does not fit its key.
struct ConfigurationValueError: Error {
    var reason: String
}

/// The keys of each section and how each reads its value.
enum ConfigurationKey {
    typealias Setter = @Sendable (inout Configuration, String) throws(ConfigurationValueError) -> Void

    static let all: [String: [String: Setter]] = [
        "Daemon": [
            "LogLevel": { configuration, value throws(ConfigurationValueError) in
                configuration.logLevel = value.isEmpty ? Configuration().logLevel : try parseLogLevel(value)
            },
            "AdminGroup": { configuration, value throws(ConfigurationValueError) in
                configuration.adminGroup = value.isEmpty ? nil : try resolveGroup(value)
            },
        ],
        "Apps": [
            "MaxApps": { configuration, value throws(ConfigurationValueError) in
                configuration.maxApps =
                    value.isEmpty ? Configuration().maxApps : try parseInteger(value, in: 1...1_000_000)
            }
        ],
        "Varlink": [
            "MaxMessageSize": { configuration, value throws(ConfigurationValueError) in
                configuration.maxMessageSize =
                    value.isEmpty ? Configuration().maxMessageSize : try parseSize(value, in: 4096...(64 << 20))
            },
            "MaxConnections": { configuration, value throws(ConfigurationValueError) in
                configuration.maxConnections =
                    value.isEmpty ? Configuration().maxConnections : try parseInteger(value, in: 1...65536)
            },
        ],
    ]

    static let sections = Set(all.keys)
    static let sectionList = all.keys.sorted().map { "[\($0)]" }.joined(separator: ", ")

    static func parseLogLevel(_ value: String) throws(ConfigurationValueError) -> Logger.Level {
        // systemd's names, plus swift-log's.
        switch value.lowercased() {
        case "trace": return .trace
        case "debug": return .debug
        case "info": return .info
        case "notice": return .notice
        case "warning", "warn": return .warning
        case "err", "error": return .error
        case "crit", "critical", "alert", "emerg": return .critical
        default: throw ConfigurationValueError(reason: "expected debug, info, notice, warning, error or critical")
        }
    }

    static func resolveGroup(_ name: String) throws(ConfigurationValueError) -> AdminGroup {
        guard let group = getgrnam(name) else {
            throw ConfigurationValueError(reason: "no group of that name on this system")
        }
        return AdminGroup(name: name, id: group.pointee.gr_gid)
    }

    static func parseInteger(_ value: String, in range: ClosedRange<Int>) throws(ConfigurationValueError) -> Int {
        guard let number = Int(value) else { throw ConfigurationValueError(reason: "expected a whole number") }
        guard range.contains(number) else {
            throw ConfigurationValueError(reason: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    /// Bytes with an optional K, M or G suffix (powers of 1024, as systemd reads them).
    static func parseSize(_ value: String, in range: ClosedRange<Int>) throws(ConfigurationValueError) -> Int {
        var digits = Substring(value)
        var multiplier = 1
        switch digits.last?.uppercased() {
        case "K": multiplier = 1 << 10
        case "M": multiplier = 1 << 20
        case "G": multiplier = 1 << 30
        default: break
        }
        if multiplier > 1 { digits = digits.dropLast() }
        guard let number = Int(digits), number >= 0 else {
            throw ConfigurationValueError(reason: "expected a size in bytes, optionally with K, M or G")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow, range.contains(bytes) else {
            throw ConfigurationValueError(reason: "must be between \(range.lowerBound) and \(range.upperBound) bytes")
        }
        return bytes
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        String(self.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
