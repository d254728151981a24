import CoalesceTestSupport
import Foundation
import Logging
import Systemd
import Testing

/// The Systemd module against a real journald and D-Bus: this test binary runs itself inside the sandbox, where
/// ``InsideSandboxTests`` are enabled.
@Suite(.serialized) struct SystemdModuleTests {
    @Test func journalAndBusWorkInsideTheSandbox() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        // The sandbox has its own /tmp, where a checkout may live: the binary goes in through /usr/local/bin.
        let tests = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let name = (tests as NSString).lastPathComponent
        let run = try await withSystemdSandbox(binaries: [name]) { sandbox in
            try sandbox.run(
                "env", "\(insideSandboxVariable)=1", "/usr/local/bin/" + name,
                "--testing-library", "swift-testing", "--filter", "InsideSandboxTests"
            )
        }
        #expect(run.status == 0, "inside the sandbox:\n\(run.stdout)\n\(run.stderr)")
        // Swift Testing reports on stderr.
        #expect(run.stderr.contains("Test run with 2 tests in 1 suite passed"), "\(run.stderr)")
    }
}

/// Set in the environment of the test binary that ``SystemdModuleTests`` starts inside the sandbox.
let insideSandboxVariable = "COALESCED_INSIDE_SANDBOX"

@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment[insideSandboxVariable] != nil,
        "runs inside the systemd sandbox, started by SystemdModuleTests"
    )
)
struct InsideSandboxTests {
    @Test func journalEntriesAreWrittenAndReadBackByMatchAndCursor() throws {
        let marker = UUID().uuidString
        let control = LogLevelControl(.debug)
        let logger = Logger(label: "inside") { _ in JournalLogHandler(identifier: "coalesced-test", control: control) }
        logger.notice(
            "Inside the sandbox",
            metadata: ["app": "org.example.mail", "marker": "\(marker)", "message_id": "d2415ccfc6e24ad782ec5497e5865f79"]
        )

        let reader = try JournalReader()
        try reader.addMatch("COALESCED_MARKER=\(marker)")
        try reader.seekHead()
        try waitUntil("the entry in the journal", timeout: .seconds(10), poll: .zero) {
            if try reader.next() { return true }
            _ = try reader.wait(timeout: .milliseconds(200))  // returns as soon as the journal changes
            return false
        }
        let entry = try reader.entry()
        #expect(entry["MESSAGE"] == "Inside the sandbox")
        #expect(entry["PRIORITY"] == "5")
        #expect(entry["SYSLOG_IDENTIFIER"] == "coalesced-test")
        #expect(entry["COALESCED_APP"] == "org.example.mail")
        #expect(entry["MESSAGE_ID"] == "d2415ccfc6e24ad782ec5497e5865f79")
        #expect(entry["CODE_FILE"]?.hasSuffix("SystemdModuleTests.swift") == true)
        #expect(entry["CODE_FUNC"] == "journalEntriesAreWrittenAndReadBackByMatchAndCursor()")

        let cursor = try reader.cursor()
        let again = try JournalReader()
        try again.seek(cursor: cursor)
        #expect(try again.next())
        #expect(try again.isAt(cursor: cursor))
        #expect(try again.field("COALESCED_MARKER") == marker)
        #expect(try again.field("COALESCED_NO_SUCH_FIELD") == nil)
    }

    @Test func busConnectionCallsReadsPropertiesReceivesSignalsAndDescriptors() async throws {
        let bus = try BusConnection(.system)
        defer { bus.close() }
        var version: String?
        for _ in 0..<100 where version == nil {
            // Refused until systemd has its name on the bus: asked again, for a bounded while.
            version = try? await bus.property(
                destination: "org.freedesktop.systemd1", path: "/org/freedesktop/systemd1",
                interface: "org.freedesktop.systemd1.Manager", name: "Version"
            ).stringValue
            if version == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(version?.hasPrefix("252") == true, "systemd's Version: \(version ?? "none")")

        let id = try await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "GetId")
        #expect(id.first?.stringValue?.count == 32 && id.first?.stringValue?.allSatisfy(\.isHexDigit) == true)
        let owner = try await bus.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetNameOwner", arguments: [.string("org.freedesktop.systemd1")]
        )
        #expect(owner.first?.stringValue?.hasPrefix(":") == true)
        await #expect {
            try await bus.property(
                destination: "org.freedesktop.systemd1", path: "/org/freedesktop/systemd1",
                interface: "org.freedesktop.systemd1.Manager", name: "NoSuchProperty"
            )
        } throws: { error in
            (error as? SystemdError)?.busError?.hasPrefix("org.freedesktop.DBus.Error.") == true
        }
        // A structure and a dictionary: systemd's Manager properties, all at once (a{sv}).
        let all = try await bus.call(
            destination: "org.freedesktop.systemd1", path: "/org/freedesktop/systemd1", interface: "org.freedesktop.DBus.Properties",
            member: "GetAll", arguments: [.string("org.freedesktop.systemd1.Manager")]
        )
        #expect(all.first?.dictionaryValue?["Version"]?.stringValue == version)

        // A signal: another connection's name appearing.
        let (names, sink) = AsyncStream.makeStream(of: String.self)
        let subscription = try await bus.subscribe(
            BusSignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        ) { signal in
            if let name = signal.arguments.first?.stringValue, signal.arguments.last?.stringValue?.isEmpty == false { sink.yield(name) }
        }
        let other = try BusConnection(.system)
        let otherName = try await other.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID",
            arguments: [.string("org.freedesktop.DBus")]
        )
        #expect(otherName.first?.uintValue != nil)
        var seen: [String] = []
        for await name in names {
            seen.append(name)
            if name.hasPrefix(":") { break }
        }
        #expect(seen.contains { $0.hasPrefix(":") })
        subscription.cancel()
        other.close()

        // A descriptor: logind's delay inhibitor, held while the descriptor is open.
        let reply = try await bus.call(
            destination: "org.freedesktop.login1", path: "/org/freedesktop/login1", interface: "org.freedesktop.login1.Manager",
            member: "Inhibit", arguments: [.string("sleep"), .string("coalesced-test"), .string("testing"), .string("delay")]
        )
        guard case .fileDescriptor(let fd) = reply.first else {
            Issue.record("Inhibit answered \(reply)")
            return
        }
        #expect(fd > 2)
        close(fd)

        bus.close()
        await #expect(throws: SystemdError.self) {
            try await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "GetId")
        }
    }
}
