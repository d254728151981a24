import CoalesceTestSupport
import Foundation
import Testing
import Varlink

@Suite struct SocketTests {
    @Test func refusesToStartWhereAnotherInstanceAnswers() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        let second = try DaemonProcess(arguments: ["--socket", first.socketPath])
        #expect(try await onThread { second.waitForExit() } == 1)
        #expect(second.output.contains("another instance is already serving \(first.socketPath)"))
        // The first one is untouched.
        try await onThread { () throws in #expect(try testClient(first.socketPath).call("io.coalesced.System.Stats")["stats"] != nil) }
        first.signal(SIGKILL)
    }

    @Test func replacesAStaleSocketFile() async throws {
        let first = try DaemonProcess()
        try await onThread { try first.waitUntilReady() }
        first.signal(SIGKILL)  // no clean-up: the socket file stays behind
        _ = try await onThread { first.waitForExit() }
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let second = try DaemonProcess(arguments: ["--socket", first.socketPath])
        try await onThread { try second.waitUntilReady() }
        try await onThread { () throws in #expect(try testClient(first.socketPath).call("io.coalesced.System.Stats")["stats"] != nil) }
        second.signal(SIGKILL)
    }

    @Test func servesASocketPassedBySocketActivation() async throws {
        // systemd-socket-activate binds the socket, then execs the daemon with LISTEN_FDS=1 on the first
        // connection, exactly as coalesced.socket would.
        let directory = try TemporaryDirectory()
        let socket = directory.file("activated.sock")
        let activator = try ChildProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "--listen=\(socket)", "--fdname=io.coalesced",
                "-E", "SWIFT_BACKTRACE=enable=no",
                BuildProducts.path(of: "coalesced"),
                "--socket", directory.file("unused.sock"),
                "--state-dir", directory.file("state"),
                "--config", "/dev/null",
            ]
        )
        try await withBlockingCleanup {
            let stats = try await onThread { () -> JSONObject in
                // The activator binds the socket file a moment before it listens: retry a refused connect, bounded.
                let client = try waitUntil("systemd-socket-activate to listen on \(socket)", timeout: .seconds(10)) {
                    () throws -> VarlinkClient? in
                    do {
                        return try testClient(socket, timeout: .seconds(20))
                    } catch VarlinkClientError.cannotConnect {
                        return nil
                    }
                }
                return try client.call("io.coalesced.System.Stats")
            }
            #expect(stats["stats"]?["connections"] == 1)
            #expect(!FileManager.default.fileExists(atPath: directory.file("unused.sock")), "it must not bind its own socket")
        } cleanup: {
            activator.signal(SIGKILL)
            _ = activator.wait()
        }
    }

    @Test func garbageOversizedAndTruncatedFramesLeaveOtherClientsServed() async throws {
        let daemon = try DaemonProcess(configuration: "[Varlink]\nMaxMessageSize=64K\n")
        try await onThread { try daemon.waitUntilReady() }
        // The bystander stays connected throughout: all of it on a thread of its own.
        try await onThread {
            let bystander = try testClient(daemon.socketPath)
            _ = try bystander.call("io.coalesced.System.Stats")
            do {
                let garbage = try testClient(daemon.socketPath)
                try garbage.sendRaw(Array("\u{1}\u{2}binary junk".utf8) + [0])
                #expect(try garbage.receiveReply().error == "io.coalesced.Protocol.InvalidMessage")
                #expect(garbage.waitForClose(timeout: .seconds(10)))

                let deep = try testClient(daemon.socketPath)
                try deep.sendRaw(Array(String(repeating: "[", count: 50_000).utf8) + [0])
                #expect(try deep.receiveReply().parameters["reason"]?.stringValue?.contains("nesting deeper") == true)

                let oversized = try testClient(daemon.socketPath)
                try? oversized.sendRaw([UInt8](repeating: UInt8(ascii: "a"), count: 200_000))
                #expect(try oversized.receiveReply() == VarlinkReply(error: VarlinkProtocolError.messageTooLarge(limit: 65536).varlinkError(in: "io.coalesced.Protocol")))
                #expect(oversized.waitForClose(timeout: .seconds(10)))

                for cut in [1, 10, 25] {
                    let truncated = try testClient(daemon.socketPath)
                    try truncated.sendRaw(Array(#"{"method":"io.coalesced.System.Stats"}"#.utf8.prefix(cut)))
                }
            }
            let stats = try bystander.call("io.coalesced.System.Stats")["stats"]
            #expect(stats?["protocolErrors"] == 3)
            #expect(try testClient(daemon.socketPath).call("io.coalesced.System.Stats")["stats"] != nil)
        }
        daemon.signal(SIGTERM)
        #expect(try await onThread { daemon.waitForExit() } == 0, "output: \(daemon.output)")
    }
}

@Suite struct StateDirectoryTests {
    @Test func aNewStateDirectoryIsPrivateAndAnExistingOneKeepsItsMode() async throws {
        let fresh = try DaemonProcess()
        try await onThread { try fresh.waitUntilReady() }
        let attributes = try FileManager.default.attributesOfItem(atPath: fresh.directory.file("state"))
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        fresh.signal(SIGKILL)

        let directory = try TemporaryDirectory()
        try directory.directory("shared", mode: 0o755)
        let existing = try DaemonProcess(arguments: ["--state-dir", directory.file("shared")])
        try await onThread { try existing.waitUntilReady() }
        let kept = try FileManager.default.attributesOfItem(atPath: directory.file("shared"))
        #expect((kept[.posixPermissions] as? Int) == 0o755)
        existing.signal(SIGKILL)
    }
}

@Suite struct SocketDirectoryTests {
    @Test func missingDirectoriesOfTheSocketAreCreated() async throws {
        let directory = try TemporaryDirectory()
        let socket = directory.file("run/coalesced/io.coalesced")
        let daemon = try DaemonProcess(arguments: ["--socket", socket])
        try await onThread { try daemon.waitUntilReady() }
        try await onThread { () throws in #expect(try testClient(socket).call("io.coalesced.System.Stats")["stats"] != nil) }
        daemon.signal(SIGKILL)
    }
}

@Suite struct SocketModeTests {
    @Test func aUserInstanceSocketIsItsUsersAloneAndTheSystemOneIsOpenToAll() async throws {
        for (flag, mode) in [("--user", 0o600), ("--system", 0o666)] {
            let daemon = try DaemonProcess(arguments: [flag])
            try await onThread { try daemon.waitUntilReady() }
            let attributes = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(flag)")
            daemon.signal(SIGKILL)
        }
    }
}
