import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// Connections under quotas and descriptor limits, against the real daemon: one user cannot lock the others out,
/// root always gets in, and a daemon out of descriptors says so instead of spinning.
@Suite struct ConnectionLimitTests {
    /// Holds connections as another user: opens `count` of them, makes a call on each, writes one line per
    /// connection (`ok`, or the error and its parameters) to `out`, then keeps them open until it is killed.
    static let holder = #"""
        import json, os, signal, socket, sys
        path, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        held, lines = [], []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            try:
                s.sendall(b'{"method":"org.varlink.service.GetInfo"}\0')
            except OSError:
                pass  # refused and closed already: the refusal is waiting to be read
            data = b""
            while not data.endswith(b"\0"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            reply = json.loads(data[:-1]) if data.endswith(b"\0") else {"error": "closed without a reply"}
            if "error" in reply:
                lines.append(reply["error"] + " " + json.dumps(reply.get("parameters", {}), sort_keys=True))
            else:
                lines.append("ok")
            held.append(s)
        with open(out + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(out + ".tmp", out)
        signal.pause()
        """#

    /// Runs ``holder`` as `uid` and returns what each connection got, once it has them all.
    static func hold(
        _ count: Int,
        as uid: Int,
        daemon: DaemonProcess,
        name: String
    ) throws -> (process: ChildProcess, results: [String]) {
        let directory = try daemon.directory.directory(name)
        chmod(directory, 0o777)  // where the holder writes
        let script = directory + "/holder.py"
        try Self.holder.write(toFile: script, atomically: true, encoding: .utf8)
        let out = directory + "/results"
        let process = try ChildProcess(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=65534", "--clear-groups", "/usr/bin/python3", script, daemon.socketPath, "\(count)", out]
        )
        let results = try waitUntil("uid \(uid) to hold \(count) connections", timeout: .seconds(30)) { () -> [String]? in
            guard let text = try? String(contentsOfFile: out, encoding: .utf8) else {
                if process.hasEnded { throw SupportError("the holder for uid \(uid) ended without results") }
                return nil
            }
            return text.split(separator: "\n").map(String.init)
        }
        return (process, results)
    }

    static func refusal(_ quota: String, _ limit: Int) -> String {
        #"io.coalesced.Protocol.TooManyConnections {"limit": \#(limit), "quota": "\#(quota)"}"#
    }

    @Test func oneUserCannotTakeEveryConnectionAndRootAlwaysGetsIn() async throws {
        let daemon = try DaemonProcess(
            configuration: "[Varlink]\nMaxConnections=8\nReservedConnections=2\nMaxConnectionsPerUser=4\n"
        )
        try await onThread { try daemon.waitUntilReady() }
        chmod(daemon.directory.path, 0o755)  // for the other users to reach the socket
        let (nobody, nobodys) = try await onThread { try Self.hold(6, as: 65534, daemon: daemon, name: "nobody") }
        defer { nobody.signal(SIGKILL) }
        #expect(nobodys == Array(repeating: "ok", count: 4) + Array(repeating: Self.refusal("MaxConnectionsPerUser", 4), count: 2))
        // A second user gets what is left of the connections others may use: 8 less the 2 kept in reserve.
        let (other, others) = try await onThread { try Self.hold(4, as: 12345, daemon: daemon, name: "other") }
        defer { other.signal(SIGKILL) }
        #expect(others == ["ok", "ok", Self.refusal("MaxConnections", 6), Self.refusal("MaxConnections", 6)])
        // Root's status, through the CLI, uses the reserve.
        let status = try await onThread {
            try runProcess(BuildProducts.path(of: "coalescectl"), ["--socket", daemon.socketPath, "status"])
        }
        #expect(status.status == 0, "\(status.stderr)")
        // Each refusal was logged, with the quota that refused it.
        #expect(daemon.output.components(separatedBy: "Refusing a connection").count - 1 == 4, "\(daemon.output)")
        #expect(daemon.output.contains("quota=MaxConnectionsPerUser"))
        daemon.signal(SIGKILL)
    }

    @Test func aConnectionCostsTheDaemonOneDescriptor() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let before = try Self.openDescriptors(daemon.pid)
            let clients = try (0..<20).map { _ in try testClient(daemon.socketPath, timeout: .seconds(10)) }
            for client in clients { _ = try client.call("org.varlink.service.GetInfo") }
            let after = try Self.openDescriptors(daemon.pid)
            // Two each would be 40 more; a descriptor or two of the daemon's own may come and go meanwhile.
            #expect((clients.count...clients.count + 2).contains(after - before), "\(before) descriptors before, \(after) with \(clients.count) connections")
        }
        daemon.signal(SIGKILL)
    }

    @Test func maxConnectionsIsFittedToTheDescriptorLimitAndTheSoftLimitRaised() async throws {
        let daemon = try DaemonProcess(
            configuration: "[Varlink]\nMaxConnections=4096\n",
            wrapper: ["/usr/bin/prlimit", "--nofile=64:160", "--"]
        )
        try await onThread { try daemon.waitUntilReady() }
        let limits = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let files = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }
        #expect(files?.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).prefix(2) == ["160", "160"])
        #expect(daemon.output.contains("MaxConnections= does not fit the file descriptor limit"), "\(daemon.output)")
        // Past what fits, connections are refused by name, none left waiting.
        let refusal = try await onThread { () -> (Int, VarlinkReply) in
            var held: [VarlinkClient] = []
            for _ in 0..<160 {
                let client = try testClient(daemon.socketPath, timeout: .seconds(10))
                try client.send(VarlinkCall(method: "org.varlink.service.GetInfo"))
                let reply = try client.receiveReply()
                if reply.error != nil { return (held.count, reply) }
                held.append(client)
            }
            throw SupportError("160 connections served under a limit of 160 descriptors")
        }
        #expect(refusal.1.error == "io.coalesced.Protocol.TooManyConnections")
        #expect(refusal.1.parameters == ["quota": "MaxConnections", "limit": .int(Int64(refusal.0))])
        daemon.signal(SIGKILL)
    }

    @Test func outOfDescriptorsTheDaemonRefusesByNameLogsOnceAndRecovers() async throws {
        let daemon = try DaemonProcess(configuration: "[Varlink]\nMaxConnections=1000\n")
        try await onThread { try daemon.waitUntilReady() }
        // Room for a few connections more than the daemon holds now, and no more: MaxConnections= does not fit.
        let limit = try Self.openDescriptors(daemon.pid) + 4
        let set = try await onThread {
            try runProcess("/usr/bin/prlimit", ["--pid", "\(daemon.pid)", "--nofile=\(limit):\(limit)"])
        }
        try #require(set.status == 0, "\(set.stderr)")
        try await onThread {
            var held: [VarlinkClient] = []
            var refused = 0
            for _ in 0..<12 {
                let client = try testClient(daemon.socketPath, timeout: .seconds(10))
                try? client.send(VarlinkCall(method: "org.varlink.service.GetInfo"))
                let reply = try client.receiveReply()
                if reply.error == nil {
                    held.append(client)
                } else {
                    #expect(reply == VarlinkReply(error: VarlinkError(name: "io.coalesced.Protocol.TooManyConnections", parameters: ["quota": "LimitNOFILE", "limit": .int(Int64(limit))])))
                    refused += 1
                }
            }
            #expect(!held.isEmpty && held.count < 12)
            #expect(refused == 12 - held.count)
            held.removeAll()
            // Once connections close, the daemon serves again.
            try waitUntil("the daemon to serve again after its connections closed") {
                let client = try testClient(daemon.socketPath, timeout: .seconds(10))
                return (try? client.call("io.coalesced.System.Stats")) != nil
            }
        }
        #expect(daemon.output.components(separatedBy: "Out of file descriptors").count - 1 == 1, "\(daemon.output)")
        daemon.signal(SIGKILL)
    }

    /// The descriptors a process has open.
    static func openDescriptors(_ pid: Int32) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }
}
