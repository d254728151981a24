import CoalesceTestSupport
import Foundation
import InMemoryLogging
import Logging
import Synchronization
import Testing
import Varlink

/// Streaming calls: replies with `more`, the end of a call whose client hangs up, and a method that breaks its reply
/// contract.
extension ServerTests {
    @Test func streamsRepliesWithMoreAndRefusesWithoutIt() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            var received: [Int64] = []
            try client.callMore("org.example.test.Count", ["n": 3]) { reply in
                received.append(reply["i"]?.intValue ?? -1)
            }
            #expect(received == [0, 1, 2, 3])
            #expect(throws: VarlinkError.expectedMore) { try client.call("org.example.test.Count", ["n": 3]) }
        }
    }

    /// A client that hangs up with replies of a streaming call still unread makes the server's next read fail
    /// (ECONNRESET) rather than end: the call is cancelled all the same, as it is when the client hangs up cleanly.
    @Test func aStreamingCallEndsWhenItsClientHangsUpWithRepliesUnread() async throws {
        try await self.withServer { path, _ in
            for round in 0..<20 {
                let token = "\(getpid())-\(round)"
                let client = try testClient(path)
                try client.send(VarlinkCall(method: "org.example.test.Linger", parameters: ["token": .string(token)], more: true))
                #expect(try client.receiveReply().parameters["i"] == 1)
                try waitUntil("the second reply to reach the client's socket", timeout: .seconds(10), poll: .milliseconds(1)) {
                    client.hasPendingInput
                }
                withExtendedLifetime(client) {}  // closed here, with the second reply unread
            }
            try waitUntil("every call to be cancelled", timeout: .seconds(10), poll: .milliseconds(10)) {
                Lingered.cancelled.withLock { cancelled in (0..<20).allSatisfy { cancelled.contains("\(getpid())-\($0)") } }
            }
        }
    }

    /// A streaming call ended because its client went away is no bug of the method, whether the method returns
    /// or throws `CancellationError`: it is logged at debug, not as an error, however many clients do it. A method
    /// that returns without a final reply while its client is still there is a bug, and is logged as an error.
    @Test func aStreamingCallEndedByItsClientLeavingIsNotLoggedAsAnError() async throws {
        let log = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in log })
        logger.logLevel = .trace
        try await self.withServer(logger: logger) { path, _ in
            for round in 0..<6 {
                let token = "gone-\(getpid())-\(round)"
                let method = round % 2 == 0 ? "org.example.test.Linger" : "org.example.test.Sleep"
                do {
                    let client = try testClient(path)
                    try client.send(VarlinkCall(method: method, parameters: ["token": .string(token)], more: true))
                    #expect(try client.receiveReply().parameters["i"] == 1)
                    // Linger's second reply read too: the client leaves while the method waits for cancellation.
                    if round % 2 == 0 { #expect(try client.receiveReply().parameters["i"] == 2) }
                }  // closed here, with the call running
                try waitUntil("the call to be cancelled", timeout: .seconds(10), poll: .milliseconds(10)) {
                    Lingered.cancelled.withLock { $0.contains(token) }
                }
            }
            let client = try testClient(path)
            #expect(throws: (any Error).self) { try client.call("org.example.test.Forgetful") }
        }
        // Read once the server has stopped: every call has ended and logged what it did.
        let bugs = log.entries.filter { $0.level >= .error }
        #expect(bugs.count == 1, "\(bugs)")
        #expect(bugs.first?.message.description == "Method returned without a final reply")
        #expect(bugs.first?.metadata["method"] == "org.example.test.Forgetful")
    }

    /// A stream that ends a reader for not keeping up (``VarlinkResponder/failAndClose(_:)``) gives a reader that
    /// reads after a pause every reply sent before the end, then the error, then the end of the connection.
    @Test func aReaderEndedForNotReadingGetsEveryReplyThenTheErrorThenTheEnd() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            try client.send(VarlinkCall(method: "org.example.test.Flood", parameters: ["size": 10_000, "bound": .int(1 << 20)], more: true))
            // Not read for a while: the kernel's buffer fills, and the rest waits in the server. A sleep, not a wait:
            // nothing tells the client that the server has sent everything, and the replies are checked the same
            // either way.
            usleep(500_000)
            var received = 0
            while true {
                let reply = try client.receiveReply()
                if let error = reply.error {
                    #expect(error == "org.example.test.Overrun")
                    #expect(reply.parameters["sent"] == .int(Int64(received)), "every reply sent came before the error")
                    break
                }
                #expect(reply.parameters["i"] == .int(Int64(received)))
                received += 1
            }
            #expect(received > 100)
            #expect(client.waitForClose(timeout: .seconds(10)), "the connection ends after the error")
        }
    }

    @Test func aMethodThatBreaksItsReplyContractStillEndsItsCallExactlyOnce() async throws {
        try await self.withServer { path, _ in
            let client = try testClient(path)
            #expect {
                try client.call("org.example.test.Forgetful")
            } throws: { error in
                (error as? VarlinkError)?.varlinkName == "io.coalesced.Protocol.InternalError"
            }
            #expect(throws: VarlinkError.expectedMore) { try client.call("org.example.test.Careless") }
            #expect(try client.call("org.example.test.Twice") == [:])
            // Still in step: the next reply belongs to the next call.
            #expect(try client.call("org.example.test.Echo", ["value": "next"]) == ["value": "next"])
        }
    }
}
