import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// `systemctl freeze coalesced.service` and `thaw` while a client posts without pause: the posts wait in the
/// socket while the daemon is frozen, their replies come after the thaw, and every answered post is kept, none
/// invented, with no restart. The freeze lasts less than the unit's WatchdogSec= (30 s): on systemd before 258 a
/// frozen unit's watchdog keeps running (systemd issue 38517), which docs/operator.md tells operators.
@Suite(.serialized) struct DaemonFreezeTests {
    /// Posts to org.example.load with coalescectl, one call after the other, until the stop file exists; writes how
    /// many posts were answered, every 10 and at the end, to the count file.
    static let load = """
        #!/bin/bash
        set -u
        n=0
        record() { echo "$n" >"$2.new" && mv "$2.new" "$2"; }
        while [ ! -e "$1" ]; do
            coalescectl post org.example.load load.tick >/dev/null || { echo "post $n failed" >&2; exit 1; }
            n=$((n + 1))
            if [ $((n % 10)) -eq 0 ]; then record "$@"; fi
        done
        record "$@"

        """

    static func answered(_ sandbox: SystemdSandbox) throws -> Int {
        Int(try sandbox.run("cat", "/run/load.count").stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    @Test func freezingTheDaemonUnderLoadLosesNothingAndRestartsNothing() async throws {
        guard SystemdUnitTests.requireSandbox() else { return }
        try await withSystemdSandbox(binaries: ["coalesced", "coalescectl"]) { sandbox in
            try sandbox.installUnits()
            #expect(try sandbox.run("systemctl", "start", "coalesced.service").status == 0)
            let pid = try sandbox.property("coalesced.service", "MainPID")
            let registered = try sandbox.run(
                "coalescectl", "call", "io.coalesced.App.Register", #"{"name":"org.example.load","kinds":{"load.tick":{"policy":"count"}}}"#
            )
            #expect(registered.status == 0, "\(registered.stderr)")
            try sandbox.write("/run/load.sh", Self.load)
            let started = try sandbox.run("systemd-run", "--unit=load", "/bin/bash", "/run/load.sh", "/run/load.stop", "/run/load.count")
            #expect(started.status == 0, "\(started.stderr)")
            try waitUntil("the first posts answered", timeout: .seconds(20), poll: .milliseconds(50)) { try Self.answered(sandbox) >= 30 }

            #expect(try sandbox.run("systemctl", "freeze", "coalesced.service").status == 0)
            #expect(try sandbox.property("coalesced.service", "FreezerState") == "frozen")
            let atFreeze = try Self.answered(sandbox)
            // The scenario: the daemon stays frozen three seconds, well within its watchdog's 30.
            Thread.sleep(forTimeInterval: 3)
            let beforeThaw = try Self.answered(sandbox)
            #expect(beforeThaw - atFreeze <= 10, "posts were answered while the daemon was frozen: \(atFreeze) → \(beforeThaw)")
            #expect(try sandbox.run("systemctl", "thaw", "coalesced.service").status == 0)
            try waitUntil("posts answered again after the thaw", timeout: .seconds(20), poll: .milliseconds(50)) {
                try Self.answered(sandbox) >= beforeThaw + 30
            }
            try sandbox.write("/run/load.stop", "")
            try waitUntil("the load to end", timeout: .seconds(20), poll: .milliseconds(100)) {
                try sandbox.property("load.service", "ActiveState") != "active"
            }
            #expect(try sandbox.property("load.service", "Result") == "success")
            let answered = try Self.answered(sandbox)

            let queue = try JSONParser.parse(try sandbox.run("coalescectl", "call", "io.coalesced.System.GetQueue", #"{"app":"org.example.load"}"#).stdout)
            let held = queue["held"]?.arrayValue?.first { $0["kind"] == "load.tick" }
            #expect(held?["count"]?.intValue == Int64(answered), "\(queue), answered \(answered)")
            #expect(try sandbox.property("coalesced.service", "NRestarts") == "0")
            #expect(try sandbox.property("coalesced.service", "MainPID") == pid)
            #expect(try sandbox.property("coalesced.service", "FreezerState") == "running")
        }
    }
}
