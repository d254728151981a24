public import Varlink

/// Posts an event of `kind` to `target` (an app's name, or `topic:NAME`) through `io.coalesced.App.Post`, and
/// returns whether it was sent at once (`false`: held). An error the daemon answers with is thrown as the
/// ``VarlinkError`` it is.
/// - Parameter policy: the coalescing policy for a kind the app did not declare, as `{"policy": …}`.
@discardableResult
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func post(
    _ client: VarlinkClient,
    _ target: String,
    _ kind: String,
    _ payload: JSONValue = [:],
    policy: JSONValue? = nil
) throws -> Bool? {
    var parameters: JSONObject = ["target": .string(target), "kind": .string(kind), "payload": payload]
    if let policy { parameters["policy"] = policy }
    return try client.call("io.coalesced.App.Post", parameters)["delivered"]?.boolValue
}

/// An app registered by ``commitUnhurriedWrites(_:)`` to post to; it never runs.
public let commitProbe = "org.test.commit"

/// Returns once everything the daemon has written so far is on disk, for a test that kills it with SIGKILL next.
/// The daemon writes acknowledgements and apps' states unhurried: to disk with the next commit, or a tenth of a
/// second later. A post to a durable kind is such a commit, answered once on disk; this one goes to an app
/// registered for it (``commitProbe``), which holds it, so that the test's own apps receive nothing more.
@available(*, noasync, message: "it blocks its thread: from async code, call it through onThread { }")
public func commitUnhurriedWrites(_ system: VarlinkClient) throws {
    _ = try system.call("io.coalesced.App.Register", ["name": .string(commitProbe)])
    guard try post(system, commitProbe, "commit") == false else { throw SupportError("\(commitProbe) was sent a post") }
}
