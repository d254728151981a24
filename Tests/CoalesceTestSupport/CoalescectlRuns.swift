import Foundation

/// coalescectl copied where nobody can run it, talking to `daemon` as nobody (no administrator, no group of its
/// own). Blocks: call it through ``onThread(_:)`` from async code.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func coalescectlAsNobody(_ daemon: DaemonProcess, _ arguments: [String]) throws -> Run {
    let copy = try executableCopy(of: "coalescectl", in: daemon.directory)
    return try runProcess(
        "/usr/bin/setpriv",
        ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "--socket", daemon.socketPath] + arguments
    )
}

/// coalescectl's bash completion script, written to a directory of its own, and what it completes.
public struct BashCompletion: Sendable {
    let directory: TemporaryDirectory

    /// Generates the script with the built coalescectl.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public init() throws {
        let script = try runProcess(BuildProducts.path(of: "coalescectl"), ["--generate-completion-script", "bash"])
        guard script.status == 0 else { throw SupportError("coalescectl --generate-completion-script bash: \(script.stderr)") }
        self.directory = try TemporaryDirectory()
        try self.directory.write("coalescectl.bash", script.stdout)
    }

    /// The completions bash offers for the last of `words` (the command line so far, the program first), sorted.
    /// Blocks: call it through ``onThread(_:)`` from async code.
    @available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
    public func complete(_ words: [String]) throws -> [String] {
        let line = words.joined(separator: " ")
        let program = """
            source \(self.directory.file("coalescectl.bash"))
            COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " ")))
            COMP_CWORD=\(words.count - 1)
            COMP_LINE='\(line)'
            COMP_POINT=\(line.utf8.count)
            _coalescectl "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let run = try runProcess("/bin/bash", ["-c", program])
        guard run.status == 0 else { throw SupportError("bash completion failed: \(run.stderr)") }
        return run.stdout.split(separator: "\n").map(String.init).sorted()
    }
}
