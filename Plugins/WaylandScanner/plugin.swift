import Foundation
import PackagePlugin

/// Runs wayland-scanner (Debian's libwayland-bin) on each Wayland protocol XML in the target: the client header into
/// the generated `include/`, the marshalling tables into a C source compiled with the target. The protocol's XML is
/// the only copy in the repository, so the code that speaks it cannot drift from it.
@main
struct WaylandScanner: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let directory = target.directoryURL
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path())
            .filter { $0.hasSuffix(".xml") }
            .sorted()
        let scanner = try Self.scanner()
        return names.flatMap { name -> [Command] in
            let input = directory.appending(path: name)
            let stem = String(name.dropLast(".xml".count))
            let header = context.pluginWorkDirectoryURL.appending(path: "include/\(stem)-client-protocol.h")
            let code = context.pluginWorkDirectoryURL.appending(path: "\(stem)-protocol.c")
            // One command makes both, so that the header is there before anything compiles against the target: the
            // generated source is an input of the target's build, which waits for the command that makes it.
            return [
                .buildCommand(
                    displayName: "wayland-scanner \(name)",
                    executable: URL(filePath: "/bin/sh"),
                    arguments: [
                        "-c", #"set -e; mkdir -p "${2%/*}"; "$0" client-header "$1" "$2"; "$0" private-code "$1" "$3""#,
                        scanner.path(), input.path(), header.path(), code.path(),
                    ],
                    inputFiles: [input],
                    outputFiles: [header, code]
                )
            ]
        }
    }

    /// wayland-scanner on PATH, else where Debian puts it.
    private static func scanner() throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/wayland-scanner" } + ["/usr/bin/wayland-scanner"]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ScannerMissing()
        }
        return URL(filePath: found)
    }
}

struct ScannerMissing: Error, CustomStringConvertible {
    var description: String {
        "wayland-scanner is not installed: run scripts/setup, or apt-get install libwayland-bin libwayland-dev"
    }
}
