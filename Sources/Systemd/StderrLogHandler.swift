public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log backend for when stderr is a terminal or a file: one readable line per entry,
/// `level: message key=value …`.
public typealias StderrLogHandler = DaemonLogHandler<StderrSink>

extension DaemonLogHandler where Sink == StderrSink {
    public init(control: LogLevelControl) {
        self.init(sink: StderrSink(), control: control)
    }
}

/// Writes each entry to stderr as one line.
public struct StderrSink: LogSink {
    public init() {}

    public func write(_ event: LogEvent, metadata: Logger.Metadata) {
        var line = "\(event.level): \(Self.escaped("\(event.message)"))"
        for key in metadata.keys.sorted() where key != "message_id" {
            line += " \(key)=\(Self.escaped("\(metadata[key]!)"))"  // key comes from metadata
        }
        Self.writeLine(line)
    }

    /// Writes `text` and a newline to stderr as it is, unescaped: also for what must be seen before logging is set
    /// up.
    public static func writeLine(_ text: String) {
        let line = text + "\n"
        // fputs to stderr would need the C global, which strict concurrency refuses; write(2) is atomic per line.
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
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
