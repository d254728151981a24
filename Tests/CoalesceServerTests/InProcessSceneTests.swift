@testable import CoalesceServer
import CoalesceCore
import CoalesceTestSupport
import Synchronization
import Testing
import Varlink

/// Scenes on the manager in process: the windows a session reports drive each app's scenes and, through them, the
/// app, with no operator call; a window is an app's only when its user and its process are the app's.
@Suite struct InProcessSceneTests {
    static let mail = "org.example.mail"
    static let maps = "org.example.maps"

    static func window(
        _ id: String,
        of app: String,
        _ presentation: ScenePresentation,
        pid: Int32? = nil,
        title: String = ""
    ) throws -> ReportedWindow {
        ReportedWindow(id: try SceneID(id), appID: app, pid: pid, presentation: presentation, title: title)
    }

    /// `name` opened by its user, then sent home and suspended: as an app is before its windows are reported.
    static func suspended(_ name: String, _ fixture: ManagerFixture) async throws -> TestApp {
        let app = try await InProcessLifecycleTests.opened(name, fixture)
        _ = try fixture.manager.deactivate(name: name)
        #expect(try await app.sent().callbacks == ["willResignActive", "didEnterBackground"])
        try app.acknowledge()
        #expect(try app.state == .suspended)
        return app
    }

    @Test func twoWindowsOfAnAppTakeItThroughItsScenesInTheSeedsOrder() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await Self.suspended(Self.mail, fixture)
            let pid = mail.process.pid
            let manager = fixture.manager

            // Its first window focused and a second shown: woken first, then each scene connects and comes forward.
            let matches = manager.reportWindows(
                [try Self.window("w1", of: Self.mail, .focused, pid: pid, title: "Inbox"), try Self.window("w2", of: Self.mail, .shown)],
                source: .wayland, uid: 0
            )
            #expect(matches == [.scene(try AppName(Self.mail)), .scene(try AppName(Self.mail))])
            #expect(try await mail.sent().callbacks == [
                "willEnterForeground", "w1 willConnect", "w1 willEnterForeground", "didBecomeActive", "w1 didBecomeActive",
                "w2 willConnect", "w2 willEnterForeground",
            ])
            #expect(try mail.state == .active)

            // The focus moves to the second window.
            manager.reportWindows(
                [try Self.window("w1", of: Self.mail, .shown), try Self.window("w2", of: Self.mail, .focused)],
                source: .wayland, uid: 0
            )
            #expect(try await mail.sent().callbacks == ["w1 willResignActive", "w2 didBecomeActive"], "the app stays active")
            #expect(try mail.state == .active)

            // The first closes and the second is minimized: the app leaves the foreground after its last scene.
            manager.reportWindows([try Self.window("w2", of: Self.mail, .hidden)], source: .wayland, uid: 0)
            #expect(try await mail.sent().callbacks == [
                "w1 didEnterBackground", "w1 didDisconnect",
                "w2 willResignActive", "willResignActive", "w2 didEnterBackground", "didEnterBackground",
            ])
            try mail.acknowledge()
            #expect(try mail.state == .suspended, "suspended by the usual rules once didEnterBackground is acknowledged")
        }
    }

    @Test func anotherAppsWindowTakingTheFocusMakesTheFirstInactiveBeforeTheOtherIsActive() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await Self.suspended(Self.mail, fixture)
            let maps = try await Self.suspended(Self.maps, fixture)
            let manager = fixture.manager
            manager.reportWindows(
                [try Self.window("m", of: Self.mail, .focused), try Self.window("p", of: Self.maps, .shown)],
                source: .x11, uid: 0
            )
            _ = try await mail.sent()
            #expect(try await maps.sent().callbacks == ["willEnterForeground", "p willConnect", "p willEnterForeground"])
            #expect(try maps.state == .inactive)

            let monitor = try await fixture.monitor()
            manager.reportWindows(
                [try Self.window("m", of: Self.mail, .shown), try Self.window("p", of: Self.maps, .focused)],
                source: .x11, uid: 0
            )
            #expect(try await mail.sent().callbacks == ["m willResignActive", "willResignActive"])
            #expect(try await maps.sent().callbacks == ["didBecomeActive", "p didBecomeActive"])
            // Monitors see the scenes' transitions, named, beside the apps'; mail's before maps'.
            let records = try await monitor.read { $0.count >= 4 }
            let told = records.map { record in
                let transition = record.record
                return "\(transition["app"]?.stringValue ?? "?") \(transition["scene"]?.stringValue ?? "-") \(transition["to"]?.stringValue ?? "?")"
            }
            #expect(told == [
                "\(Self.mail) m foregroundInactive", "\(Self.mail) - inactive", "\(Self.maps) - active", "\(Self.maps) p foregroundActive",
            ])
        }
    }

    @Test func aWindowIsAnAppsSceneOnlyForItsUserAndItsProcess() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await Self.suspended(Self.mail, fixture)
            try await fixture.register(Self.maps)
            let manager = fixture.manager
            let name = try AppName(Self.mail)
            // Another user's session cannot claim root's app; a window of another process only claims its id; an app
            // not running has no scenes.
            #expect(manager.reportWindows([try Self.window("w", of: Self.mail, .focused)], source: .wayland, uid: 1000) == [.noApp])
            #expect(
                manager.reportWindows([try Self.window("w", of: Self.mail, .focused, pid: 4242)], source: .wayland, uid: 0)
                    == [.notTheAppsProcess(name, pid: 4242)]
            )
            #expect(manager.reportWindows([try Self.window("x", of: Self.maps, .focused)], source: .wayland, uid: 0) == [.notRunning(try AppName(Self.maps))])
            #expect(manager.reportWindows([try Self.window("y", of: "org.example.unknown", .focused)], source: .wayland, uid: 0) == [.noApp])
            #expect(try await mail.sent() == TestApp.Sent(), "nothing reached the app")
            #expect(try mail.state == .suspended)
        }
    }

    @Test func aWindowReportedBeforeItsAppAttachesBecomesItsSceneWhenItDoes() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await fixture.register(Self.mail)
            let manager = fixture.manager
            let name = try AppName(Self.mail)
            // An app shows its window before it connects: the window waits in the report.
            #expect(manager.reportWindows([try Self.window("w", of: Self.mail, .focused)], source: .wayland, uid: 0) == [.notRunning(name)])
            let mail = try await fixture.attach(Self.mail)
            #expect(try await mail.sent().callbacks == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive", "w willConnect", "w willEnterForeground", "w didBecomeActive",
            ])
            try mail.acknowledge()

            // Its process ends, and the next one attaches to the same window, still reported.
            try await mail.hangUp()
            try await waitUntil("\(Self.mail) not running") { try mail.state == .notRunning }
            let again = try await fixture.attach(Self.mail)
            #expect(try await again.sent().callbacks == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive", "w willConnect", "w willEnterForeground", "w didBecomeActive",
            ])
        }
    }

    @Test func aWindowWithAnAppIdTheAppDeclaredIsItsSceneAndTheDeclarationOutlivesARestart() async throws {
        let directory = try TemporaryDirectory()
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            // Tk gives a window the class of its app capitalized; a desktop file has an id of its own.
            try await fixture.register(Self.mail, windowIDs: ["Org.example.mail", "mail.desktop"])
            let mail = try await fixture.attach(Self.mail)
            _ = try await mail.sent()
            let name = try AppName(Self.mail)
            let matches = fixture.manager.reportWindows(
                [
                    try Self.window("a", of: "Org.example.mail", .focused, pid: mail.process.pid),
                    try Self.window("b", of: "mail.desktop", .shown), try Self.window("c", of: "org.example.other", .shown),
                ],
                source: .x11, uid: 0
            )
            #expect(matches == [.scene(name), .scene(name), .noApp])
            #expect(try await mail.sent().callbacks == [
                "a willConnect", "a willEnterForeground", "a didBecomeActive", "b willConnect", "b willEnterForeground",
            ])
            // Registering again without them keeps them; another user's session cannot use them.
            try await fixture.register(Self.mail)
            #expect(fixture.manager.reportWindows([try Self.window("d", of: "mail.desktop", .shown)], source: .x11, uid: 1000) == [.noApp])
        }
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            #expect(try fixture.manager.get(Self.mail).registration.windowIDs == ["Org.example.mail", "mail.desktop"])
            // Cleared with none: the name alone is the app's again.
            try await fixture.register(Self.mail, windowIDs: [])
            _ = try await fixture.attach(Self.mail)
            #expect(fixture.manager.reportWindows([try Self.window("a", of: "Org.example.mail", .shown)], source: .x11, uid: 0) == [.noApp])
        }
    }

    @Test func windowAppIdsAreCheckedAsTheAppRegisters() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            try await withAppClient(fixture) { client in
                let control = await refusal { try await client.call("Register", ["name": .string(Self.mail), "windowIds": ["a\u{7}b"]]) }
                #expect(control?.varlinkName == "org.varlink.service.InvalidParameter")
                #expect(control?.varlinkParameters["parameter"] == "windowIds[0]")
                #expect(control?.varlinkParameters["reason"]?.stringValue?.contains("U+0007") == true)
                let many = JSONValue.array((0...AppRegistration.maximumWindowIDs).map { .string("id\($0)") })
                let tooMany = await refusal { try await client.call("Register", ["name": .string(Self.mail), "windowIds": many]) }
                #expect(tooMany?.varlinkName == "io.coalesced.App.TooManyDeclared")
                let registered = try await client.call("Register", ["name": .string(Self.mail), "windowIds": ["Mail", "Mail"]])
                #expect(registered["app"]?["windowIds"] == ["Mail"])
            }
        }
    }

    @Test func aTitleChangeTellsTheAppNothingAndTheProcessEndingUnattachesItsScenes() async throws {
        try await withManager { (fixture: ManagerFixture) async throws in
            let mail = try await Self.suspended(Self.mail, fixture)
            let manager = fixture.manager
            manager.reportWindows([try Self.window("w", of: Self.mail, .focused, title: "one")], source: .wayland, uid: 0)
            _ = try await mail.sent()
            manager.reportWindows([try Self.window("w", of: Self.mail, .focused, title: "two")], source: .wayland, uid: 0)
            let record = try #require(manager.state.withLock { $0.records[try! AppName(Self.mail)] })
            #expect(record.scenes.scenes[try SceneID("w")]?.title == "two")

            let monitor = try await fixture.monitor()
            try await mail.hangUp()
            let records = try await monitor.read { records in records.contains { $0.record["scene"] != nil } }
            let scene = records.first { $0.record["scene"] != nil }?.record
            #expect(scene?["from"] == "foregroundActive" && scene?["to"] == "unattached")
            #expect(manager.state.withLock { $0.records[try! AppName(Self.mail)]?.scenes.scenes.isEmpty } == true)
        }
    }

    @Test func whatAnAppSavedForASceneComesBackWithItsWillConnectAfterARestart() async throws {
        let directory = try TemporaryDirectory()
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            _ = try await Self.suspended(Self.mail, fixture)
            try await fixture.manager.saveSceneState(name: Self.mail, uid: 0, scene: try SceneID("w1"), data: "draft 3")
            // Another user cannot save for it, and a state past MaxSavedState= is refused: nothing of either is kept.
            await #expect(throws: AppError.notOwner(app: Self.mail)) {
                try await fixture.manager.saveSceneState(name: Self.mail, uid: 1000, scene: try SceneID("w2"), data: "x")
            }
            let large = String(repeating: "x", count: fixture.manager.daemon.configuration.maxSavedState + 1)
            await #expect(throws: AppError.self) {
                try await fixture.manager.saveSceneState(name: Self.mail, uid: 0, scene: try SceneID("w2"), data: large)
            }
        }
        try await withManager(directory: directory) { (fixture: ManagerFixture) async throws in
            let mail = try await InProcessLifecycleTests.opened(Self.mail, fixture)
            fixture.manager.reportWindows(
                [try Self.window("w1", of: Self.mail, .shown), try Self.window("w2", of: Self.mail, .hidden)], source: .wayland, uid: 0
            )
            let connects = try await mail.callbacks().filter { $0["kind"] == "scene.willConnect" }
            #expect(connects.map { $0["scene"] } == ["w1", "w2"])
            #expect(connects.map { $0["restoredState"] } == ["draft 3", nil])
            #expect(connects.map { $0["source"] } == ["wayland", "wayland"])
        }
    }
}
