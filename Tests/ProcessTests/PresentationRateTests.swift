import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The presentation rate through the real daemon: one user's flood of immediate notifications runs the command (and
/// writes the journal) at most `PresentationBurst=` times per `PresentationIntervalSec=`, the rest coalesced per
/// thread into presentations whose counts add up, listed in the delivered list, and the journal says so once.
@Suite struct PresentationRateTests {
    static let app = "org.example.flood"

    let log: TemporaryDirectory
    init() throws { self.log = try TemporaryDirectory() }

    /// The command's lines so far: `id thread count`.
    func presented() -> [String] {
        let text = (try? String(contentsOfFile: self.log.file("presented.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    static func count(_ line: String) -> Int { Int(line.split(separator: " ").last ?? "") ?? 0 }

    @Test func twoHundredImmediateNotificationsAreTheBurstThenOneCoalescedPresentationPerThread() async throws {
        // The defaults: 20 per 10 s.
        let daemon = try DaemonProcess(
            configuration: noDeadlines + """
                [Notifications]
                Command=printf '%s %s %s\\n' "$COALESCED_NOTIFICATION" "$COALESCED_THREAD" "$COALESCED_COUNT" >> \(self.log.file("presented.log"))

                """
        )
        let (elapsed, delivered) = try await onThread { () throws -> (Duration, [JSONValue]) in
            try daemon.waitUntilReady()
            let client = try testClient(daemon.socketPath)
            _ = try client.call("io.coalesced.App.Register", ["name": .string(Self.app)])
            // Sent together and answered together, so that all of them fall in the first interval on a loaded machine
            // too; threads a and b in turn.
            let clock = ContinuousClock()
            let start = clock.now
            for index in 1...200 {
                let request: JSONObject = [
                    "id": .string("r\(index)"), "content": ["title": .string("t\(index)"), "threadId": index % 2 == 0 ? "a" : "b"],
                ]
                try client.send(VarlinkCall(method: "io.coalesced.Notifications.Schedule", parameters: ["app": .string(Self.app), "request": .object(request)]))
            }
            for _ in 1...200 {
                let reply = try client.receiveReply()
                #expect(reply.error == nil, "\(reply)")
            }
            let elapsed = clock.now - start
            try waitUntil("every notification to be presented or coalesced", timeout: .seconds(90)) {
                self.presented().map(Self.count).reduce(0, +) == 200
            }
            let delivered = try client.call("io.coalesced.Notifications.ListDelivered", ["app": .string(Self.app)])["delivered"]?.arrayValue ?? []
            return (elapsed, delivered)
        }
        let lines = self.presented()
        #expect(lines.map(Self.count).reduce(0, +) == 200, "the counts add up: \(lines)")
        #expect(delivered.compactMap { $0["count"]?.intValue }.reduce(0, +) == 200, "the delivered list has them all: \(delivered)")
        #expect(delivered.count == lines.count)
        if elapsed < .seconds(10) {
            // All in the first interval: the burst at once, then one presentation per thread for the other 180.
            #expect(lines.count == 22, "\(lines)")
            #expect(lines.prefix(20).allSatisfy { Self.count($0) == 1 }, "\(lines)")
            #expect(Set(lines.suffix(2)) == ["r200 a 90", "r199 b 90"], "\(lines)")
        } else {
            // A machine so loaded that the Schedules took longer: still the burst per interval at most.
            let intervals = Int(elapsed / .seconds(10)) + 2
            #expect(lines.count <= 20 * intervals, "\(lines.count) presentations in \(elapsed)")
        }
        let passed = daemon.output.components(separatedBy: "pass the presentation rate").count - 1
        #expect(passed == 1, "the journal says so once:\n\(daemon.output)")
        daemon.signal(SIGKILL)
    }
}
