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
        var line = "\(event.level): \(Self.escaped("\(event.message)"))"
        for key in merged.keys.sorted() {
            line += " \(key)=\(Self.escaped("\(merged[key]!)"))"  // key comes from merged
        }
        line += "\n"
        // fputs to stderr would need the C global, which strict concurrency refuses; write(2) is atomic per line.
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    /// One entry stays one line whatever a peer put into a logged value.
    static func escaped(_ text: String) -> String {
        guard text.contains(where: { $0.isNewline || $0 == "\t" }) else { return text }
        var result = ""
        for character in text {
            switch character {
            case "\n": result += "\\n"
            case "\r", "\r\n": result += "\\r"
            case "\t": result += "\\t"
            default: result.append(character.isNewline ? " " : character)
            }
        }
        return result
    }
}
