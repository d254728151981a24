import CSystemd
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log backend writing native journal entries with `sd_journal_sendv`.
///
/// Each entry has MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/CODE_LINE/CODE_FUNC, and the logger's metadata
/// as fields named `COALESCED_<KEY>` (upper-cased, anything but letters and digits becoming `_`), so that
/// `journalctl COALESCED_APP=org.example.mail` finds an app's entries. The metadata key `message_id` becomes the
/// entry's `MESSAGE_ID`, which the catalog explains.
public typealias JournalLogHandler = DaemonLogHandler<JournalSink>

extension DaemonLogHandler where Sink == JournalSink {
    public init(identifier: String, control: LogLevelControl) {
        self.init(sink: JournalSink(identifier: identifier), control: control)
    }
}

/// Writes each entry to the journal, as ``JournalLogHandler`` says.
public struct JournalSink: LogSink {
    private let identifier: String

    public init(identifier: String) {
        self.identifier = identifier
    }

    public func write(_ event: LogEvent, metadata: Logger.Metadata) {
        var fields: [String] = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(Self.priority(event.level))",
            "SYSLOG_IDENTIFIER=\(self.identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        for (key, value) in metadata {
            if key == "message_id" {
                fields.append("MESSAGE_ID=\(value)")
            } else {
                fields.append("\(Self.fieldName(for: key))=\(value)")
            }
        }
        Self.send(fields)
    }

    /// The journal field for a metadata key: journal field names are upper-case letters, digits and underscores.
    public static func fieldName(for key: String) -> String {
        let body = key.uppercased().map { character -> Character in
            (character.isASCII && (character.isLetter || character.isNumber)) ? character : "_"
        }
        return "COALESCED_" + String(body)
    }

    /// syslog(3) priorities, which journald and journalctl use.
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    private static func send(_ fields: [String]) {
        // One contiguous buffer holds every field; the iovecs point into it. Lengths, not NULs, delimit fields,
        // so values may contain newlines.
        var storage: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = storage.count
            storage.append(contentsOf: field.utf8)
            ranges.append(start..<storage.count)
        }
        storage.withUnsafeMutableBytes { raw in
            let vectors = ranges.map { range in
                iovec(iov_base: raw.baseAddress! + range.lowerBound, iov_len: range.count)
            }
            vectors.withUnsafeBufferPointer { pointer in
                // A journal that is not there cannot be told that it is not there.
                _ = sd_journal_sendv(pointer.baseAddress, Int32(pointer.count))
            }
        }
    }
}
