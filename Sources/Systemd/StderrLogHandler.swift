public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log backend for when stderr is a terminal or a file: one readable line per entry,
/// `level: message key=value …`.
public struct StderrLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let control: LogLevelControl

    public init(control: LogLevelControl) {
        self.control = control
    }

    public var logLevel: Logger.Level {
        get { self.control.current }
        set { self.control.current = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = event.mergedMetadata(self.metadata, provider: self.metadataProvider)
        merged["message_id"] = nil
        var line = "\(event.level): \(event.message)"
        for key in merged.keys.sorted() {
            line += " \(key)=\(merged[key]!)"  // key comes from merged
        }
        line += "\n"
        // fputs to stderr would need the C global, which strict concurrency refuses; write(2) is atomic per line.
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
