import Foundation
import Testing

/// What the repository's layout promises and a reviewer would otherwise check by hand: the daemon and its tools
/// reach Linux only through the `Systemd` module, and no source file grows past what a reader takes in at once.
@Suite struct SourceBoundaryTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift file under `folder`, by its path from the repository's root.
    static func swiftFiles(under folder: String) -> [String] {
        let base = self.root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.map { "\(folder)/\($0)" }.sorted()
    }

    static func lines(of path: String) throws -> [Substring] {
        try String(contentsOf: self.root.appendingPathComponent(path), encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
    }

    /// Modules that import the C library themselves: the boundary itself, the libraries an app links, which must
    /// not bring libsystemd with them, and the X11 and Wayland boundaries (xcb's replies are freed with free(3),
    /// waited for with poll(2); libwayland's errors are errno values).
    static let mayImportTheCLibrary = [
        "Sources/Systemd/", "Sources/Varlink/", "Sources/CoalesceClient/", "Sources/VarlinkEmbed/", "Sources/X11Session/",
        "Sources/WaylandSession/",
    ]
    /// Files elsewhere that do, and why.
    static let exceptions: [String: String] = [
        // The client library reads the instance's paths through CoalesceWire: it must not link libsystemd.
        "Sources/CoalesceWire/InstancePaths.swift": "the client's paths",
        // memchr and memcmp on every journal message: the C library's string functions, no Linux call.
        "Sources/CoalesceServer/Journal/MessageMatcher.swift": "string search",
    ]

    @Test func onlyTheSystemdModuleImportsTheCLibraryOrLibsystemd() throws {
        var found: [String] = []
        for folder in ["Sources", "Benchmarks"] {
            // The ThreadSanitizer build's Mutex, linked into each module that uses one (scripts/tsan), is on pthreads.
            for path in Self.swiftFiles(under: folder)
            where !Self.mayImportTheCLibrary.contains(where: path.hasPrefix) && Self.exceptions[path] == nil
                && !path.hasSuffix("/ThreadSanitizerMutex.swift")
            {
                if try Self.lines(of: path).contains(where: { $0 == "import Glibc" || $0 == "import CSystemd" }) {
                    found.append(path)
                }
            }
        }
        #expect(found == [], "make the call through a type of Sources/Systemd instead")
    }

    /// xcb is the screen agent's alone: only X11Session imports it, and only the agent imports X11Session, so that
    /// neither the daemon nor coalescectl links libxcb.
    @Test func onlyX11SessionImportsXcbAndOnlyTheScreenAgentX11Session() throws {
        var found: [String] = []
        for folder in ["Sources", "Benchmarks", "Examples"] {
            for path in Self.swiftFiles(under: folder) {
                let lines = try Self.lines(of: path)
                if !path.hasPrefix("Sources/X11Session/"), lines.contains(where: { $0.hasSuffix("import CXcb") }) {
                    found.append("\(path): CXcb")
                }
                if !path.hasPrefix("Sources/CoalesceScreenAgent/"), lines.contains(where: { $0.hasSuffix("import X11Session") }) {
                    found.append("\(path): X11Session")
                }
            }
        }
        #expect(found == [])
        let package = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(package.components(separatedBy: #""X11Session""#).count - 1 == 2, "declared once, a dependency of one target")
    }

    /// libwayland-client is the screen agent's alone, as xcb is: only WaylandSession imports CWaylandToplevel, and
    /// only the agent imports WaylandSession.
    @Test func onlyWaylandSessionImportsLibwaylandAndOnlyTheScreenAgentWaylandSession() throws {
        var found: [String] = []
        for folder in ["Sources", "Benchmarks", "Examples"] {
            for path in Self.swiftFiles(under: folder) {
                let lines = try Self.lines(of: path)
                if !path.hasPrefix("Sources/WaylandSession/"), lines.contains(where: { $0.hasSuffix("import CWaylandToplevel") }) {
                    found.append("\(path): CWaylandToplevel")
                }
                if !path.hasPrefix("Sources/CoalesceScreenAgent/"), lines.contains(where: { $0.hasSuffix("import WaylandSession") }) {
                    found.append("\(path): WaylandSession")
                }
            }
        }
        #expect(found == [])
        let package = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(package.components(separatedBy: #""WaylandSession""#).count - 1 == 2, "declared once, a dependency of one target")
    }

    @Test func noSourceFileIsOver500LinesAndNoTestFileOver600() throws {
        var long: [String] = []
        for (folder, limit) in [("Sources", 500), ("Benchmarks", 500), ("Examples", 500), ("Tests", 600)] {
            for path in Self.swiftFiles(under: folder) {
                let count = try Self.lines(of: path).count - 1
                if count > limit { long.append("\(path): \(count) lines (at most \(limit))") }
            }
        }
        #expect(long == [])
    }
}
