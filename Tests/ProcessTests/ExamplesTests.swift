import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The quick start's example apps (Examples/), run as their users would run them, and the documentation that
/// quotes them.
@Suite struct ExamplesTests {
    /// The repository, from this file's place in it.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The `python3` on `PATH`, as a user who runs the example gets it (scripts/setup installs `varlink` for it).
    static let python: String = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { $0 + "/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? "/usr/bin/python3"
    }()

    /// Each example as a command, and where its source is.
    enum Example: String, CaseIterable, CustomTestStringConvertible {
        case swift = "Examples/Notes/main.swift"
        case python = "Examples/python/notes_app.py"

        var command: (String, [String]) {
            switch self {
            case .swift: return (BuildProducts.path(of: "notes-example"), [])
            case .python: return (ExamplesTests.python, [ExamplesTests.repository + "/" + self.rawValue])
            }
        }

        var testDescription: String { self.rawValue }
    }

    /// What the user sees of the app through a launch, a post, home, posts while it is suspended, the wake and
    /// its termination: the same for both examples.
    @Test(arguments: Example.allCases)
    func theNotesAppLivesThroughItsLifecycle(_ example: Example) async throws {
        let daemon = try DaemonProcess()
        try await onThread {
            try daemon.waitUntilReady()
            let system = try testClient(daemon.socketPath)
            let app = "org.example.notes"
            func start() throws -> WatchedProcess {
                let (executable, arguments) = example.command
                return try WatchedProcess(executable, arguments, environment: ["COALESCED_SOCKET": daemon.socketPath])
            }
            func call(_ method: String, _ parameters: JSONObject = [:]) throws {
                _ = try system.call("io.coalesced.System." + method, parameters)
            }
            let first = try start()
            try first.waitForLine("active")
            #expect(try post(system, app, "badge", ["unread": 1]) == true)
            try first.waitForLine("badge +1")
            try call("Deactivate")
            try first.waitForLine("saved unread=1")
            // Its background task ended: suspended, and what is posted is held.
            try waitForApp(system, app, "state", "suspended")
            #expect(try post(system, app, "badge", ["unread": 2]) == false)
            #expect(try post(system, app, "badge", ["unread": 3]) == false)
            try call("Activate", ["app": .string(app)])
            try first.waitForLine("badge +5")
            try call("Terminate", ["app": .string(app)])
            try first.waitForLine("exited")
            #expect(first.child.wait(timeout: .seconds(10)) == 0)
            #expect(
                first.output == [
                    "launched foreground unread=0",
                    "active",
                    "badge +1 from 1 posts, unread=1",
                    "inactive",
                    "background",
                    "saved unread=1",
                    "foreground",
                    "active",
                    "badge +5 from 2 posts, unread=6",
                    "terminating",
                    "exited",
                ]
            )
            // The next launch restores what it saved.
            let second = try start()
            #expect(try second.waitForLine("launched") == "launched foreground unread=1")
        }
    }

    static let reminders = "Examples/python/reminders_app.py"

    /// The reminders example schedules a reminder once it is active, shows it when it fires (willPresent, as it is
    /// active) and prints the user's answer, handed back with its userInfo.
    @Test func theRemindersAppShowsItsReminderAndHearsTheAnswer() async throws {
        let daemon = try DaemonProcess()
        try await onThread {
            try daemon.waitUntilReady()
            let client = try testClient(daemon.socketPath)
            let app = "org.example.reminders"
            let process = try WatchedProcess(
                ExamplesTests.python, [ExamplesTests.repository + "/" + ExamplesTests.reminders],
                environment: ["COALESCED_SOCKET": daemon.socketPath]
            )
            try process.waitForLine("scheduled")
            try process.waitForLine("reminder")
            _ = try client.call(
                "io.coalesced.Notifications.Respond", ["app": .string(app), "id": "tea", "action": "snooze"]
            )
            try process.waitForLine("answered")
            // Snoozed: scheduled again, five minutes on.
            try waitUntil("the snoozed reminder to be pending") { () throws -> Bool in
                let pending = try client.call("io.coalesced.Notifications.ListPending", ["app": .string(app)])["pending"]
                return pending?.arrayValue?.count == 1
            }
            _ = try client.call("io.coalesced.System.Terminate", ["app": .string(app)])
            try process.waitForLine("exited")
            #expect(process.child.wait(timeout: .seconds(10)) == 0)
            #expect(
                process.output == [
                    "scheduled tea",
                    "reminder tea: Tea is ready",
                    "answered tea with snooze, pot 2",
                    "terminating",
                    "exited",
                ]
            )
        }
    }

    /// docs/app-developer.md quotes each example whole: the block after the link to its file is the file.
    @Test(arguments: Example.allCases.map(\.rawValue) + [ExamplesTests.reminders])
    func theDocumentationQuotesTheExampleAsItIs(_ example: String) throws {
        let documentation = try String(contentsOfFile: Self.repository + "/docs/app-developer.md", encoding: .utf8)
        let source = try String(contentsOfFile: Self.repository + "/" + example, encoding: .utf8)
        let lines = documentation.components(separatedBy: "\n")
        guard let link = lines.firstIndex(where: { $0.contains("](../\(example))") }) else {
            Issue.record("docs/app-developer.md does not link to \(example)")
            return
        }
        guard let open = lines[link...].firstIndex(where: { $0.hasPrefix("```") }),
            let close = lines[(open + 1)...].firstIndex(where: { $0 == "```" })
        else {
            Issue.record("no code block follows the link to \(example)")
            return
        }
        let quoted = lines[(open + 1)..<close].joined(separator: "\n") + "\n"
        #expect(quoted == source, "docs/app-developer.md's copy of \(example) differs from the file; copy it again")
    }
}
