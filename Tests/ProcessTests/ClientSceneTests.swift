import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The Swift client library's scenes: the example app (CoalesceClient, its `SceneDelegate`) gets each scene's
/// callbacks in the daemon's order, and what it saves for a scene comes back with the scene's next willConnect.
/// The windows are reported here as a session's screen agent reports them (`io.coalesced.Screen`), naming the
/// app's own process.
@Suite struct ClientSceneTests {
    static let mail = "org.example.mail"

    static func report(_ client: VarlinkClient, _ windows: [JSONValue]) throws {
        _ = try client.call("io.coalesced.Screen.ReportWindows", ["source": "x11", "windows": .array(windows)])
    }

    /// The `scene …` lines the app printed, from the `from`th on, once there are at least `count` more.
    static func scenes(_ app: ExampleApp, from: Int, count: Int) throws -> [String] {
        try waitUntil("\(count) scene lines of \(app.name) after \(from); output:\n\(app.output.joined(separator: "\n"))") {
            let lines = app.output.filter { $0.hasPrefix("scene ") }
            return lines.count >= from + count ? Array(lines[from...]) : nil
        }
    }

    @Test func theSceneDelegateHearsEachWindowAndWhatItSavedComesBack() async throws {
        let daemon = try DaemonProcess()
        try await onThread {
            try daemon.waitUntilReady()
            let mail = try ExampleApp(socket: daemon.socketPath, name: Self.mail, arguments: ["--save-scene-state", "draft 7"])
            #expect(try mail.nextCallbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
            let screen = try VarlinkClient(path: daemon.socketPath)
            let window: JSONValue = [
                "id": "0x00400007", "appId": .string(Self.mail), "pid": .int(Int64(mail.child.pid)), "presentation": "focused",
                "title": "Inbox",
            ]
            try Self.report(screen, [window])
            #expect(try Self.scenes(mail, from: 0, count: 3) == [
                "scene willConnect id=0x00400007 source=x11 restored=-", "scene willEnterForeground id=0x00400007",
                "scene didBecomeActive id=0x00400007",
            ])

            // Closed: it resigns, goes to the background (where the app saves for it) and disconnects.
            try Self.report(screen, [])
            #expect(try Self.scenes(mail, from: 3, count: 4) == [
                "scene willResignActive id=0x00400007", "scene didEnterBackground id=0x00400007", "scene saved id=0x00400007",
                "scene didDisconnect id=0x00400007",
            ])
            // The same window again: restored.
            try Self.report(screen, [window])
            let again = try Self.scenes(mail, from: 7, count: 1)
            #expect(again.first == "scene willConnect id=0x00400007 source=x11 restored=draft 7")
        }
    }
}
