import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// What an app declares or posts that is of the right type but not right for the product gets an error of ours that
/// names what is wrong and why (the reasons coalescectl's own parsing gives, in the interface's notation), from the
/// real daemon over its socket; nothing is changed.
@Suite struct ContentErrorTests {
    static let mail = "org.example.mail"

    static func register(_ client: VarlinkClient, _ parameters: JSONObject) throws {
        var all: JSONObject = ["name": .string(Self.mail)]
        for (name, value) in parameters { all[name] = value }
        _ = try client.call("io.coalesced.App.Register", all)
    }

    static func error(_ name: String, _ parameters: JSONObject) -> VarlinkError {
        VarlinkError(name: "io.coalesced.App." + name, parameters: parameters)
    }

    /// Registrations with one thing wrong in their content, each with the refusal it gets.
    static let refusedRegistrations: [(JSONObject, VarlinkError)] = [
        (
            ["kinds": ["mail": ["policy": "lastest"]]] as JSONObject,
            Self.error(
                "InvalidPolicy",
                [
                    "kind": "mail",
                    "reason": "'lastest' is not a policy: latest, first, count, sum (with field), merge, netChange or queue (with bound)",
                ]
            )
        ),
        (["kinds": ["badge": ["policy": "sum"]]], Self.error("InvalidPolicy", ["kind": "badge", "reason": #"sum needs the member to add up in field, such as "unread""#])),
        (["kinds": ["log": ["policy": "queue"]]], Self.error("InvalidPolicy", ["kind": "log", "reason": "queue needs a bound, such as 10"])),
        (
            ["kinds": ["log": ["policy": "queue", "bound": 0]]],
            Self.error("InvalidPolicy", ["kind": "log", "reason": "queue's bound 0 is not a number from 1 to 10000"])
        ),
        (
            ["kinds": ["mail": ["policy": "latest", "backgroundMode": ""]]],
            Self.error("InvalidPolicy", ["kind": "mail", "reason": "a background mode is 1 to 64 bytes"])
        ),
        (
            ["kinds": ["Mail.Received": ["policy": "latest"]]],
            Self.error("InvalidKind", ["kind": "Mail.Received", "reason": "each label starts with a lower-case letter or digit"])
        ),
        (["topics": ["news", "a..b"]], Self.error("InvalidTopic", ["topic": "a..b", "reason": "empty label between dots"])),
        (
            ["posters": ["groups": ["no-such-group-here"]]],
            Self.error("InvalidPosters", ["reason": #"no group named "no-such-group-here" on this system"#])
        ),
        (["posters": ["uids": [1000, -1]]], Self.error("InvalidPosters", ["reason": "-1 is not a uid: uids are from 0 to 4294967295"])),
        (["backgroundModes": ["audio", ""]], Self.error("InvalidBackgroundMode", ["mode": "", "reason": "a background mode is 1 to 64 bytes; this one is 0"])),
        (
            ["backgroundModes": .array((0...32).map { .string("mode\($0)") })],
            Self.error("TooManyDeclared", ["parameter": "backgroundModes", "count": 33, "limit": 32])
        ),
        (
            ["topics": .array((0...64).map { .string("topic\($0)") })],
            Self.error("TooManyDeclared", ["parameter": "topics", "count": 65, "limit": 64])
        ),
    ]

    @Test func aRegistrationOfTheRightTypesButWrongContentIsRefusedWithItsReason() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            for (parameters, refusal) in Self.refusedRegistrations {
                #expect(throws: refusal, "\(JSONValue.object(parameters).jsonText)") { try Self.register(client, parameters) }
            }
            #expect(try client.call("io.coalesced.System.Stats")["stats"]?["apps"] == 0, "nothing was registered")
        }
        daemon.signal(SIGKILL)
    }

    @Test func aPostsPolicyIsRefusedNamingThePostsKindAndAPayloadNotAnObjectByItsType() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        try await onThread {
            let client = try testClient(daemon.socketPath)
            try Self.register(client, [:])
            #expect(throws: Self.error("InvalidPolicy", ["kind": "badge", "reason": #"sum needs the member to add up in field, such as "unread""#])) {
                try post(client, Self.mail, "badge", ["n": 1], policy: ["policy": "sum"])
            }
            #expect(throws: Self.error("InvalidPolicy", ["kind": "log", "reason": "queue's bound 20000 is not a number from 1 to 10000"])) {
                try post(client, Self.mail, "log", [:], policy: ["policy": "queue", "bound": 20000])
            }
            // A type the interface declares, checked before the method runs: the standard error, with its reason.
            #expect(throws: VarlinkError.invalidParameter("payload", reason: "expected an object, got an array")) {
                try post(client, Self.mail, "mail", [1])
            }
            let queue = try client.call("io.coalesced.System.GetQueue", ["app": .string(Self.mail)])
            #expect(queue["held"]?.arrayValue?.isEmpty == true, "nothing refused was held")
        }
        daemon.signal(SIGKILL)
    }

    /// coalescectl prints the daemon's error with its reason; its own parsing of a policy gives the same reason in the
    /// command line's notation, before any call.
    @Test func coalescectlPrintsTheReason() async throws {
        let daemon = try DaemonProcess()
        try await onThread { try daemon.waitUntilReady() }
        let ctl = BuildProducts.path(of: "coalescectl")
        let register = try await onThread {
            try runProcess(ctl, [
                "--socket", daemon.socketPath, "call", "io.coalesced.App.Register",
                #"{"name":"org.example.mail","kinds":{"mail":{"policy":"lastest"}}}"#,
            ])
        }
        #expect(register.status == 1)
        #expect(
            register.stderr.contains(
                #"coalescectl: the daemon answered with an error: io.coalesced.App.InvalidPolicy {"kind":"mail","reason":"'lastest' is not a policy: latest, first, count, sum (with field), merge, netChange or queue (with bound)"}"#
            ),
            "\(register.stderr)"
        )
        try await onThread { _ = try testClient(daemon.socketPath).call("io.coalesced.App.Register", ["name": .string(Self.mail)]) }
        let posted = try await onThread {
            try runProcess(ctl, ["--socket", daemon.socketPath, "post", Self.mail, "mail", "--policy", "lastest"])
        }
        #expect(posted.status == 64)
        #expect(
            posted.stderr.contains("--policy: 'lastest' is not a policy: latest, first, count, sum:FIELD, merge, netChange or queue:BOUND"),
            "\(posted.stderr)"
        )
        let bound = try await onThread {
            try runProcess(ctl, ["--socket", daemon.socketPath, "post", Self.mail, "mail", "--policy", "queue:20000"])
        }
        #expect(bound.stderr.contains("--policy: queue's bound 20000 is not a number from 1 to 10000, such as queue:10"), "\(bound.stderr)")
        daemon.signal(SIGKILL)
    }
}
