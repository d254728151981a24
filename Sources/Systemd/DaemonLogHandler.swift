public import Logging
import Synchronization

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

/// Where a ``DaemonLogHandler`` writes an entry: the journal, or stderr.
public protocol LogSink: Sendable {
    /// Writes `event` with its metadata merged (the handler's, the provider's, the event's own and its error).
    func write(_ event: LogEvent, metadata: Logger.Metadata)
}

/// The one swift-log handler of the daemon and its tools: the level shared through a ``LogLevelControl``, the
/// logger's metadata and provider, and a sink that writes each entry.
public struct DaemonLogHandler<Sink: LogSink>: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let control: LogLevelControl
    private let sink: Sink

    public init(sink: Sink, control: LogLevelControl) {
        self.sink = sink
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
        self.sink.write(event, metadata: event.mergedMetadata(self.metadata, provider: self.metadataProvider))
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
