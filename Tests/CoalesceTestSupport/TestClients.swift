import Foundation

/// The C programs in Tests/Clients (an app with Wayland windows, one with X11 windows): each built once per run, on
/// first use, into a directory the run keeps.
public enum TestClients {
    /// `Tests/Clients/NAME.c`.
    public static func source(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Clients/\(name).c").path
    }

    /// Builds the client `name` with `build`, given its source, a directory of its own and the executable's path to
    /// write; returns that path. The directory lives as long as the run.
    public static func build(
        _ name: String, _ build: (_ source: String, _ directory: TemporaryDirectory, _ executable: String) throws -> Void
    ) throws -> String {
        let directory = try TemporaryDirectory()
        let executable = directory.file(name)
        try build(self.source(name), directory, executable)
        self.lock.withLock { self.kept.append(directory) }
        return executable
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var kept: [TemporaryDirectory] = []
}
