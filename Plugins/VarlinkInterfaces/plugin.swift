import Foundation
import PackagePlugin

/// Compiles the target's `Interfaces/*.varlink` files into Swift string constants, so the texts the daemon serves
/// from `GetInterfaceDescription` are the files in the repository, byte for byte, and the binary needs no resource
/// bundle at run time.
@main
struct VarlinkInterfaces: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let directory = target.directoryURL.appending(path: "Interfaces")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path())
            .filter { $0.hasSuffix(".varlink") }
            .sorted()
        let tool = try context.tool(named: "VarlinkEmbed")
        return names.map { name in
            let input = directory.appending(path: name)
            let output = context.pluginWorkDirectoryURL.appending(path: name + ".swift")
            return .buildCommand(
                displayName: "Embedding \(name)",
                executable: tool.url,
                arguments: [input.path(), output.path()],
                inputFiles: [input],
                outputFiles: [output]
            )
        }
    }
}
