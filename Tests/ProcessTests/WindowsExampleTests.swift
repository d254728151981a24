import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The Python example with two windows (Examples/python/windows_app.py: Tk and the PyPI varlink package) on a
/// real X session with openbox, followed by coalesce-screen-agent: each window is a scene, and the focus, moved with
/// xdotool, moves between them.
@Suite struct WindowsExampleTests {
    @Test func thePythonAppsTwoWindowsAreItsScenes() async throws {
        try await ScreenAgentX11Tests.withSession(apps: []) { daemon, session, agent, _ in
            let app = try WatchedProcess(
                ExamplesTests.python, [ExamplesTests.repository + "/Examples/python/windows_app.py"],
                environment: ["DISPLAY": session.display, "COALESCED_SOCKET": daemon.socketPath]
            )
            defer { app.child.signal(SIGKILL) }
            /// The app's lines from the `from`th on, once one of them is `last`.
            func lines(from: Int, until last: String) throws -> [String] {
                try waitUntil(
                    "'\(last)' from the example; it printed:\n\(app.output.joined(separator: "\n"))\nthe agent:\n"
                        + "\(agent.output.joined(separator: "\n"))\nthe daemon:\n\(daemon.output)"
                ) {
                    let lines = Array(app.output.dropFirst(from))
                    return lines.contains(last) ? lines : nil
                }
            }
            // Launched by its user, its windows already up: both connect, and the one openbox focused last is active
            // (which one that is depends on which window it mapped last).
            let launched = try lines(from: 0, until: "scene.willConnect Inbox")
            #expect(Array(launched.prefix(3)) == ["lifecycle.willFinishLaunching", "lifecycle.didFinishLaunching", "lifecycle.didBecomeActive"])
            let requests = try testClient(daemon.socketPath)
            let focused = try waitUntil("one of the example's scenes active, and the app told so") { () throws -> String? in
                let scenes = try requests.call("io.coalesced.System.GetApp", ["app": "org.example.notes"])["app"]?["scenes"]?.arrayValue ?? []
                let active = scenes.filter { $0["state"] == "foregroundActive" }.compactMap { $0["title"]?.stringValue }
                guard scenes.count == 2, active.count == 1,
                    app.output.last(where: { $0.hasPrefix("scene.") }) == "scene.didBecomeActive \(active[0])"
                else { return nil }
                return active[0]
            }
            let other = focused == "Inbox" ? "Draft" : "Inbox"

            // The user focuses the other window: its scene becomes active after the first resigns.
            let before = app.output.count
            let window = try session.run("xdotool", ["search", "--name", "^\(other)$"]).split(separator: "\n").first.map(String.init) ?? ""
            try session.run("xdotool", ["windowactivate", "--sync", window])
            let switched = try lines(from: before, until: "scene.didBecomeActive \(other)").filter { $0.hasPrefix("scene.") }
            #expect(switched == ["scene.willResignActive \(focused)", "scene.didBecomeActive \(other)"])
        }
    }
}
