import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Chooses where the daemon's logs go, the way systemd documents it: native journal entries when stderr is
/// connected to the journal (JOURNAL_STREAM names stderr's device and inode), readable lines on stderr otherwise.
public enum DaemonLogging {
    /// Whether stderr is the journal stream systemd set up for this service.
    public static var stderrIsJournal: Bool {
        guard let variable = getenv("JOURNAL_STREAM") else { return false }
        let parts = String(cString: variable).split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }

    /// Installs the process-wide backend. Call once, from main; tests give each logger its own handler instead.
    public static func bootstrap(identifier: String, control: LogLevelControl) {
        let journal = self.stderrIsJournal
        LoggingSystem.bootstrap { _ -> any LogHandler in
            if journal { return JournalLogHandler(identifier: identifier, control: control) }
            return StderrLogHandler(control: control)
        }
    }
}
