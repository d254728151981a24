import CoalesceTestSupport
import Foundation

/// The release daemon under valgrind's callgrind, as scripts/profile runs it: a copy stripped of its debug
/// information (valgrind 3.19 cannot read Swift 6's DWARF 5; the symbols stay), with
/// scripts/profile-support/dispatch-main.c preloaded (valgrind dies in the `dispatch_main` an async Swift main ends
/// in). Counting is zeroed and dumped with `callgrind_control`, so that only the measured part is counted.
final class CallgrindDaemon {
    let daemon: DaemonProcess
    private let directory: TemporaryDirectory
    private var dumps = 0

    /// Starts the daemon under callgrind with `configuration`; it is not yet ready when this returns.
    init(configuration: String) throws {
        for tool in ["/usr/bin/valgrind", "/usr/bin/callgrind_control", "/usr/bin/strip"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw SupportError("no \(tool): the instruction count needs valgrind and binutils (scripts/setup --bench)")
        }
        self.directory = try TemporaryDirectory()
        let copy = try executableCopy(of: "coalesced", in: self.directory)
        let stripped = try runProcess("/usr/bin/strip", ["--strip-debug", copy])
        guard stripped.status == 0 else { throw SupportError("strip --strip-debug \(copy) failed: \(stripped.stderr)") }

        let library = "/opt/swift/usr/lib/swift/linux"
        guard FileManager.default.fileExists(atPath: library + "/libdispatch.so") else {
            throw SupportError("no \(library)/libdispatch.so: the preloaded dispatch_main links Swift's libdispatch there")
        }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/profile-support/dispatch-main.c").path
        let preload = self.directory.file("dispatch-main.so")
        let compiled = try runProcess(
            "/usr/bin/cc",
            ["-shared", "-fPIC", "-O2", source, "-o", preload, "-L", library, "-ldispatch", "-Wl,-rpath," + library]
        )
        guard compiled.status == 0 else { throw SupportError("cc \(source) failed: \(compiled.stderr)") }

        // DaemonProcess runs the wrapper with the daemon's path and arguments after it: the wrapper drops the path
        // and runs the stripped copy in its place, keeping the pid (valgrind runs the program in its own process).
        let valgrind = "exec /usr/bin/valgrind --tool=callgrind --callgrind-out-file=\(self.directory.file("callgrind.%p")) "
            + "--dump-instr=no \(copy) \"$@\""
        self.daemon = try DaemonProcess(
            configuration: configuration,
            environment: ["LD_PRELOAD": preload],
            wrapper: ["/bin/sh", "-c", "shift; " + valgrind, "sh"]
        )
    }

    /// Counting starts again from zero.
    func zero() throws {
        try self.control("--zero")
    }

    /// The instructions counted since the last ``zero()``, in every thread of the daemon; the profile is copied to
    /// `keeping` when given (for `callgrind_annotate`).
    func dump(keeping copy: String? = nil) throws -> Int {
        try self.control("--dump")
        self.dumps += 1
        let path = self.directory.file("callgrind.\(self.daemon.pid).\(self.dumps)")
        if let copy {
            try? FileManager.default.removeItem(atPath: copy)  // absent the first time; a copy fails below otherwise
            try FileManager.default.copyItem(atPath: path, toPath: copy)
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        // The part's summary: what callgrind_annotate prints as PROGRAM TOTALS, as scripts/profile reads it.
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("summary:") }),
            let total = line.split(separator: " ").last.flatMap({ Int($0) })
        else { throw SupportError("no summary in \(path)") }
        return total
    }

    private func control(_ command: String) throws {
        let run = try runProcess("/usr/bin/callgrind_control", [command, String(self.daemon.pid)])
        guard run.status == 0 else { throw SupportError("callgrind_control \(command) failed: \(run.stdout)\(run.stderr)") }
    }
}
