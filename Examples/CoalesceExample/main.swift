import ArgumentParser
import CoalesceClient

#if canImport(Glibc)
import Glibc
#endif

/// A small app built on CoalesceClient: it prints one line per callback on standard output, and can be told to
/// behave well or badly, so that the tests can watch a real app live through its lifecycle.
@main
struct CoalesceExample: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coalesce-example",
        abstract: "An example app for coalesced: prints its lifecycle callbacks, one line each."
    )

    @Option(help: "The app's reverse-DNS name.")
    var name = "org.coalesced.example"

    @Option(help: "coalesced's socket (default: $COALESCED_SOCKET, else the system instance's).")
    var socket: String?

    @Option(name: .customLong("mode"), help: "A background mode to declare; repeatable.")
    var modes: [String] = []

    @Flag(help: "Declare that the app exits instead of being suspended.")
    var exitsOnSuspend = false

    @Option(help: "Declare the systemd service that launches the app.")
    var launchUnit: String?

    @Option(help: "Never return from this callback (a hung app), e.g. didFinishLaunching.")
    var stallOn: String?

    @Option(help: "Begin a background task with this name when entering the background.")
    var taskOnBackground: String?

    @Option(help: "End that task after this many seconds (default: never, until it expires).")
    var endTaskAfter: Double?

    @Flag(help: "End the task from its expiration handler.")
    var endTaskOnExpiry = false

    @Option(help: "SaveState this text when entering the background.")
    var saveState: String?

    @Option(help: "SaveSceneState this text for a scene when it enters the background.")
    var saveSceneState: String?

    @Option(help: "Never return from the handler of events of this kind (an app that dies before acknowledging).")
    var stallOnEvent: String?

    @Flag(help: "Ignore SIGTERM (a badly behaved app, for the grace period before SIGKILL).")
    var ignoreSigterm = false

    @Option(
        name: .customLong("kind"),
        help: "Declare how an event kind is held: KIND=POLICY, the policy latest, first, count, sum:FIELD, merge, netChange or queue:BOUND, optionally followed by ,volatile; repeatable."
    )
    var kinds: [String] = []

    @Option(name: .customLong("topic"), help: "Subscribe to this topic; repeatable.")
    var topics: [String] = []

    @Flag(help: "Let anyone post to the app.")
    var anyonePosts = false

    @Option(help: "Hold this many MiB of memory, written so that it is resident (an app that is large to purge).")
    var ballast: Int = 0

    /// The --kind declarations.
    func kindDeclarations() throws -> [String: KindDeclaration]? {
        guard !self.kinds.isEmpty else { return nil }
        var declared: [String: KindDeclaration] = [:]
        for text in self.kinds {
            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--kind \(text): expected KIND=POLICY") }
            var options = parts[1].split(separator: ",").map(String.init)
            let volatile = options.last == "volatile"
            if volatile { options.removeLast() }
            let parsed: CoalescingPolicy
            do { parsed = try CoalescingPolicy(parsing: options.first ?? "") } catch { throw ValidationError("--kind \(text): \(error)") }
            declared[parts[0]] = KindDeclaration(parsed, volatile: volatile)
        }
        return declared
    }

    func run() async throws {
        let application = CoalescedApp(
            AppDeclaration(
                name: self.name,
                backgroundModes: self.modes,
                exitsOnSuspend: self.exitsOnSuspend,
                launchUnit: self.launchUnit,
                kinds: try self.kindDeclarations(),
                posters: self.anyonePosts ? Posters(anyone: true) : nil,
                topics: self.topics.isEmpty ? nil : self.topics
            ),
            socketPath: self.socket ?? CoalescedApp.defaultSocketPath
        )
        let delegate = ExampleDelegate(
            stallOn: self.stallOn,
            stallOnEvent: self.stallOnEvent,
            taskOnBackground: self.taskOnBackground,
            endTaskAfter: self.endTaskAfter,
            endTaskOnExpiry: self.endTaskOnExpiry,
            saveState: self.saveState,
            scenes: ExampleSceneDelegate(saveSceneState: self.saveSceneState)
        )
        if self.ignoreSigterm { signal(SIGTERM, SIG_IGN) }
        // Every byte written, so that every page is resident; kept until the process ends.
        let ballast = [UInt8](repeating: 1, count: self.ballast << 20)
        say("ready pid=\(getpid())")
        defer { withExtendedLifetime(ballast) {} }
        do throws(CoalescedError) {
            try await application.run(delegate: delegate)
        } catch {
            say("refused \(error.daemonErrorName ?? "-") \(error)")
            throw ExitCode(1)
        }
        say("exit terminated")
    }
}

final class ExampleDelegate: AppDelegate {
    let stallOn: String?
    let stallOnEvent: String?
    let taskOnBackground: String?
    let endTaskAfter: Double?
    let endTaskOnExpiry: Bool
    let saveState: String?
    let scenes: ExampleSceneDelegate

    init(
        stallOn: String?,
        stallOnEvent: String?,
        taskOnBackground: String?,
        endTaskAfter: Double?,
        endTaskOnExpiry: Bool,
        saveState: String?,
        scenes: ExampleSceneDelegate
    ) {
        self.stallOn = stallOn
        self.stallOnEvent = stallOnEvent
        self.taskOnBackground = taskOnBackground
        self.endTaskAfter = endTaskAfter
        self.endTaskOnExpiry = endTaskOnExpiry
        self.saveState = saveState
        self.scenes = scenes
    }

    func app(_ app: CoalescedApp, handle delivery: Delivery) async {
        switch delivery {
        case .willFinishLaunching(let options):
            await self.report("willFinishLaunching", app, "reason=\(Self.reason(options.reason))")
        case .didFinishLaunching(let options):
            await self.report(
                "didFinishLaunching", app,
                "destination=\(options.destination.rawValue) restored=\(options.restoredState ?? "-") "
                    + "reason=\(Self.reason(options.reason)) restoration=\(options.restoration.rawValue)"
            )
        case .backgroundRefresh(let refresh):
            say("backgroundRefresh id=\(refresh.id) budget=\(refresh.budget.components.seconds)")
            do {
                try await app.refreshDone(refresh, success: true)
                say("refresh-done id=\(refresh.id)")
            } catch {
                say("refresh-done-failed id=\(refresh.id) \(error)")
            }
        case .openURL(let opened):
            say("openURL url=\(opened.url) opener=\(opened.opener) type=\(opened.type ?? "-")")
        case .didBecomeActive: await self.report("didBecomeActive", app)
        case .willResignActive: await self.report("willResignActive", app)
        case .willEnterForeground: await self.report("willEnterForeground", app)
        case .willTerminate: await self.report("willTerminate", app)
        case .didReceiveMemoryWarning: await self.report("didReceiveMemoryWarning", app)
        case .significantTimeChange: await self.report("significantTimeChange", app)
        case .protectedDataWillBecomeUnavailable: await self.report("protectedDataWillBecomeUnavailable", app)
        case .protectedDataDidBecomeAvailable: await self.report("protectedDataDidBecomeAvailable", app)
        case .didEnterBackground: await self.didEnterBackground(app)
        case .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect:
            await self.scenes.handle(delivery, in: app)
        case .backgroundTimeWillExpire: await self.report("backgroundTimeWillExpire", app)
        case .backgroundTaskWillExpire(let task):
            say("task-expiring id=\(task.id)")
            if self.endTaskOnExpiry {
                try? await app.endBackgroundTask(task)
                say("task-ended id=\(task.id)")
            }
        case .event(let event):
            var line = "event \(event.kind) count=\(event.count) payload=\(event.payloadJSON ?? "-")"
            if let dropped = event.dropped { line += " dropped=\(dropped)" }
            say(line + " seq=\(event.sequence)")
            if event.kind == self.stallOnEvent { await stall() }
        case .willPresent(let presentation):
            say(
                "notification willPresent id=\(presentation.id) serial=\(presentation.serial) "
                    + "title=\(presentation.content.title) count=\(presentation.count) late=\(presentation.late)"
            )
        case .didReceiveResponse(let response):
            say(
                "notification didReceiveResponse id=\(response.id) action=\(response.action) text=\(response.text ?? "-") "
                    + "userInfo=\(response.userInfoJSON)"
            )
        }
    }

    /// A launch's reason in one word, with what it names: `event:mail.received`, `url:mailto:x@example.org`.
    static func reason(_ reason: LaunchReason) -> String {
        switch reason {
        case .user: "user"
        case .event(let kind): "event:\(kind)"
        case .notification(let id, let action): "notification:\(id):\(action)"
        case .url(let opened): "url:\(opened.url)"
        case .refresh(let id): "refresh:\(id)"
        }
    }

    private func didEnterBackground(_ app: CoalescedApp) async {
        await self.report("didEnterBackground", app)
        if let text = self.saveState {
            do {
                try await app.saveState(text)
                say("saved-state")
            } catch {
                say("save-state-failed \(error)")
            }
        }
        guard let taskName = self.taskOnBackground else { return }
        do {
            let task = try await app.beginBackgroundTask(taskName)
            say("task-began id=\(task.id) remaining=\(task.remaining.map { "\($0.components.seconds)" } ?? "infinity")")
            if let seconds = self.endTaskAfter {
                Task {
                    try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                    try? await app.endBackgroundTask(task)
                    say("task-ended id=\(task.id)")
                }
            }
        } catch {
            say("task-refused \(error)")
        }
    }

    private func report(_ callback: String, _ app: CoalescedApp, _ details: String = "") async {
        say("callback \(callback) state=\(app.state.rawValue)\(details.isEmpty ? "" : " " + details)")
        if callback == self.stallOn { await stall() }
    }
}

/// A hung app: never returns, and so never acknowledges what it is handling.
func stall() async -> Never {
    say("stalling")
    while true { try? await Task.sleep(for: .seconds(3600)) }
}

/// One line on standard output, written at once so that a reader sees it as it happens.
func say(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(1, $0, strlen($0)) }
}

/// Prints each scene's callbacks as `scene CALLBACK id=ID`, and keeps a text for a scene that goes to the background.
struct ExampleSceneDelegate: SceneDelegate {
    let saveSceneState: String?

    func scene(_ scene: Scene, willConnectWith options: SceneConnectionOptions, in app: CoalescedApp) async {
        say("scene willConnect id=\(scene.id) source=\(options.source) restored=\(options.restoredState ?? "-")")
    }

    func sceneWillEnterForeground(_ scene: Scene, in app: CoalescedApp) async { say("scene willEnterForeground id=\(scene.id)") }
    func sceneDidBecomeActive(_ scene: Scene, in app: CoalescedApp) async { say("scene didBecomeActive id=\(scene.id)") }
    func sceneWillResignActive(_ scene: Scene, in app: CoalescedApp) async { say("scene willResignActive id=\(scene.id)") }

    func sceneDidEnterBackground(_ scene: Scene, in app: CoalescedApp) async {
        say("scene didEnterBackground id=\(scene.id)")
        guard let text = self.saveSceneState else { return }
        do {
            try await app.saveSceneState(text, for: scene)
            say("scene saved id=\(scene.id)")
        } catch {
            say("scene save-failed id=\(scene.id) \(error)")
        }
    }

    func sceneDidDisconnect(_ scene: Scene, in app: CoalescedApp) async { say("scene didDisconnect id=\(scene.id)") }
}
