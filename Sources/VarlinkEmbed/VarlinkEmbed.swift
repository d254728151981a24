import Foundation

/// Usage: VarlinkEmbed INPUT.varlink OUTPUT.swift
/// Writes `extension InterfaceText { static let ioCoalescedSystem: String }` for io.coalesced.System.varlink.
/// The text is written as its UTF-8 bytes so that no content can break out of a string literal.
enum VarlinkEmbed {
    static func run() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 3 else {
            FileHandle.standardError.write(Data("usage: VarlinkEmbed INPUT.varlink OUTPUT.swift\n".utf8))
            exit(64)
        }
        let input = URL(fileURLWithPath: arguments[1])
        let bytes = try [UInt8](Data(contentsOf: input))
        let interface = input.deletingPathExtension().lastPathComponent
        let parts = interface.split(separator: ".")
        let identifier = parts.enumerated().map { index, part in
            index == 0 ? part.lowercased() : part.prefix(1).uppercased() + part.dropFirst()
        }.joined()
        var lines: [String] = []
        for start in stride(from: 0, to: bytes.count, by: 24) {
            lines.append("        " + bytes[start..<min(start + 24, bytes.count)].map { String($0) }.joined(separator: ", ") + ",")
        }
        let source = """
            // Generated from \(input.lastPathComponent) by the VarlinkInterfaces plugin; edit the .varlink file instead.
            extension InterfaceText {
                static let \(identifier) = String(decoding: [
            \(lines.joined(separator: "\n"))
                ] as [UInt8], as: UTF8.self)
            }

            """
        try Data(source.utf8).write(to: URL(fileURLWithPath: arguments[2]))
    }
}

#if COALESCED_FUZZ_BUILD
// A build with `--sanitize=fuzzer` (scripts/fuzz) links libFuzzer's main into every executable, this build tool's
// too: the tool runs from the first hook that main calls, and never fuzzes.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(_ argc: UnsafeMutableRawPointer, _ argv: UnsafeMutableRawPointer) -> CInt {
    do {
        try VarlinkEmbed.run()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("VarlinkEmbed: \(error)\n".utf8))
        exit(1)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ start: UnsafeRawPointer, _ count: Int) -> CInt { 0 }
#else
@main
enum VarlinkEmbedMain {
    static func main() throws { try VarlinkEmbed.run() }
}
#endif
