import CSystemd
public import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The log level in force for every handler made by ``DaemonLogging``, changed at run time on reload.
public final class LogLevelControl: Sendable {
    private let level: Mutex<Logger.Level>

    public init(_ level: Logger.Level) {
        self.level = Mutex(level)
    }

    public var current: Logger.Level {
        get { self.level.withLock { $0 } }
        set { self.level.withLock { $0 = newValue } }
    }
}

/// A swift-log backend writing native journal entries with `sd_journal_sendv`.
///
/// Each entry has MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/CODE_LINE/CODE_FUNC, and the logger's metadata
/// as fields named `COALESCED_<KEY>` (upper-cased, anything but letters and digits becoming `_`), so that
/// `journalctl COALESCED_APP=org.example.mail` finds an app's entries. The metadata key `message_id` becomes the
/// entry's `MESSAGE_ID`, which the catalog explains.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let identifier: String
    private let control: LogLevelControl

    public init(identifier: String, control: LogLevelControl) {
        self.identifier = identifier
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
        var fields: [String] = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(Self.priority(event.level))",
            "SYSLOG_IDENTIFIER=\(self.identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        for (key, value) in event.mergedMetadata(self.metadata, provider: self.metadataProvider) {
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

extension LogEvent {
    /// The handler's metadata, then the provider's, then the event's own, later ones winning; the event's error as
    /// `error`.
    func mergedMetadata(_ handlerMetadata: Logger.Metadata, provider: Logger.MetadataProvider?) -> Logger.Metadata {
        var merged = handlerMetadata
        if let provided = provider?.get() { merged.merge(provided) { _, new in new } }
        if let own = self.metadata { merged.merge(own) { _, new in new } }
        if let error = self.error { merged["error"] = "\(error)" }
        return merged
    }
}
