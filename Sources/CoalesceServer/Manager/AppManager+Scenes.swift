import CoalesceCore
import CoalesceStore
import Logging
import Synchronization
import Varlink

/// One window as a user's session reports it: its scene within its app.
struct ReportedWindow: Sendable, Hashable {
    /// The window's id where it comes from (a Wayland toplevel's handle, an X11 window id): the scene's id.
    var id: SceneID
    /// The app id its window carries (Wayland's app_id, X11's WM_CLASS): the app whose name it is.
    var appID: String
    /// The process that shows it, where the window system says (X11's X-Resource extension, a compositor's IPC).
    var pid: Int32?
    var presentation: ScenePresentation
    var title: String
}

/// What a report made of one window.
enum WindowMatch: Sendable, Hashable {
    /// A scene of this app.
    case scene(AppName)
    /// No app of the reporting user has this app id: a window the daemon does not follow.
    case noApp
    /// The app is not running: its windows are not its scenes until its process attaches.
    case notRunning(AppName)
    /// The window's process is not the app's: a window that only claims the app's id.
    case notTheAppsProcess(AppName, pid: Int32)
}

/// Scenes (seed 002): the windows a user's session reports become scenes of the apps they show, each app's
/// ``AppScenes`` decides, and its lifecycle follows where they put it. The scenes' callbacks go out on the app's
/// stream numbered from its one counter, between the app-level callbacks their presence brings.
extension AppManager {
    /// A session reports every window it shows through `source`, as it is now: each window of one of the user's
    /// running apps (its app id the app's name, its process the app's) is a scene of that app; a window the last
    /// report had and this one has not is closed. Returns what each window was taken for, in order.
    @discardableResult
    func reportWindows(_ windows: [ReportedWindow], source: SceneSource, uid: UInt32) -> [WindowMatch] {
        self.decide { state, log in
            self.take(windows, from: WindowBook.Reporter(uid: uid, source: source), in: &state, log: &log)
        }
    }

    /// Takes a report: its windows are matched to apps, and each app's scenes hear what changed since the
    /// reporter's last report. The whole report is kept, so that a window of an app that attaches later becomes
    /// its scene then (``matchReportedWindows(of:in:log:)``).
    func take(_ windows: [ReportedWindow], from reporter: WindowBook.Reporter, in state: inout State, log: inout [LogEntry]) -> [WindowMatch] {
        let before = state.windows.scenes[reporter] ?? [:]
        var now: [String: WindowBook.Shown] = [:]
        var matches: [WindowMatch] = []
        var inputs: [AppName: [SceneInput]] = [:]
        for window in windows {
            let match = Self.match(window, uid: reporter.uid, in: state)
            matches.append(match)
            guard case .scene(let app) = match else { continue }
            let shown = WindowBook.Shown(app: app, window: window)
            now[window.id.value] = shown
            if let old = before[window.id.value], old.app == app {
                if old.window == window { continue }
                if old.window.presentation == window.presentation {
                    inputs[app, default: []].append(.retitle(window.id, window.title))
                    continue
                }
            }
            inputs[app, default: []].append(.show(window))
        }
        for (id, old) in before where now[id]?.app != old.app {
            inputs[old.app, default: []].insert(.close(old.window.id), at: 0)
        }
        state.windows.scenes[reporter] = now.isEmpty ? nil : now
        state.windows.reports[reporter] = windows.isEmpty ? nil : windows
        // The app whose window takes the focus goes last, so that the one that had it resigns first.
        let order = inputs.keys.sorted { a, b in
            let (aFocused, bFocused) = (inputs[a]!.contains(where: \.focuses), inputs[b]!.contains(where: \.focuses))
            return aFocused != bFocused ? bFocused : a < b
        }
        for app in order { self.feedScenes(app, inputs[app]!, source: reporter.source, in: &state, log: &log) }
        return matches
    }

    /// An app's process has attached: the windows of it that sessions reported while it had none become its
    /// scenes now.
    func matchReportedWindows(of app: AppName, in state: inout State, log: inout [LogEntry]) {
        let ids = (state.records[app]?.registration.windowIDs ?? []).union([app.value])
        for (reporter, windows) in state.windows.reports where windows.contains(where: { ids.contains($0.appID) }) {
            _ = self.take(windows, from: reporter, in: &state, log: &log)
        }
    }

    /// Keeps what the app needs to restore one of its scenes (`nil`: forgets it), on disk when this returns and for
    /// the scene's next willConnect; past the number an app keeps, the oldest save is forgotten.
    func saveSceneState(name: String, uid: UInt32, scene: SceneID, data: String?) async throws(AppError) {
        let appName = try Self.appName(name)
        // Which save it pushes out is decided as a start takes them up: by the saves so far. Kept in memory once
        // it is on disk.
        var scenes = try self.state.withLock { state throws(AppError) in try self.appRecord(appName, uid: uid, in: state).scenes }
        let limit = self.daemon.configuration.maxSavedState
        if let data, data.utf8.count > limit {
            throw .stateTooLarge(app: name, size: data.utf8.count, limit: limit)
        }
        let forgotten = scenes.save(scene, state: data)
        do {
            try await self.store.saveSceneState(of: appName, scene: scene.value, data, forgetting: forgotten?.value)
        } catch {
            throw .storageFailed(reason: error.description)
        }
        _ = self.state.withLock { state in state.update(appName) { $0.scenes.save(scene, state: data) } }
    }

    /// One change to an app's scenes.
    enum SceneInput {
        case show(ReportedWindow)
        case retitle(SceneID, String)
        case close(SceneID)

        var focuses: Bool {
            if case .show(let window) = self { return window.presentation == .focused }
            return false
        }
    }

    /// The app `window` is a scene of, for a report by `uid`: of the user's own apps (root's report may name
    /// anyone's) that go by its app id (their name, or a window app id they declared), the one running that shows it
    /// (its process the window's, where the window says which).
    static func match(_ window: ReportedWindow, uid: UInt32, in state: State) -> WindowMatch {
        var candidates = state.windowApps[window.appID] ?? []
        if let named = try? AppName(window.appID), state.records[named] != nil { candidates.insert(named) }
        let apps = candidates.sorted().filter { state.records[$0]!.registration.mayBeActedFor(by: uid) }
        guard let first = apps.first else { return .noApp }
        let running = apps.filter { state.records[$0]!.lifecycle.state.isRunning && state.records[$0]!.process != nil }
        guard let firstRunning = running.first else { return .notRunning(first) }
        guard let pid = window.pid else { return .scene(firstRunning) }
        return running.first { state.records[$0]!.process?.pid == pid }.map(WindowMatch.scene)
            ?? .notTheAppsProcess(firstRunning, pid: pid)
    }

    /// Feeds an app's scenes their inputs in order and carries out what they decide.
    func feedScenes(_ app: AppName, _ inputs: [SceneInput], source: SceneSource, in state: inout State, log: inout [LogEntry]) {
        let effects = state.update(app) { record -> [SceneEffect] in
            var effects: [SceneEffect] = []
            for input in inputs {
                switch input {
                case .show(let window):
                    effects += record.scenes.show(window.id, as: window.presentation, source: source, title: window.title)
                case .retitle(let id, let title):
                    record.scenes.retitle(id, title)
                case .close(let id):
                    effects += record.scenes.close(id)
                }
            }
            return AppScenes.settled(effects)
        } ?? []
        self.carryOutScenes(effects, of: app, in: &state, log: &log)
    }

    /// Carries out what an app's scenes decided, in order: the app follows each presence (its own callbacks, its
    /// wake or its way to suspension), each scene callback goes out numbered (held while the app runs no code), and
    /// each scene transition is logged and told to monitors.
    func carryOutScenes(
        _ effects: [SceneEffect], of app: AppName, reason: TransitionReason = .scenes, in state: inout State, log: inout [LogEntry]
    ) {
        for effect in effects {
            switch effect {
            case .presence(let from, let to):
                let now = self.now()
                self.input(app, in: &state, log: &log) { lifecycle in lifecycle.follow(to, from: from, reason: reason, now: now) }
            case .callback(let callback, let scene, let connection):
                _ = state.deciding(app) { record, outbox in
                    guard record.lifecycle.state.isRunning else { return }
                    guard record.lifecycle.receivesAtOnce, let attachment = record.attachment else {
                        record.heldSceneCallbacks.append((callback, scene, connection))
                        return
                    }
                    outbox.add(.send(attachment.responder, [Self.sceneReply(callback, scene, connection, &record)]))
                }
            case .transition(let scene, let from, let to):
                let time = self.wall()
                log.append(Self.sceneTransitionEntry(app: app, scene: scene, from: from, to: to))
                self.tellMonitors(.transitions, app: app, in: &state) {
                    [
                        "transition": [
                            "app": .string(app.value), "scene": .string(scene.value), "from": .string(from.rawValue),
                            "to": .string(to.rawValue), "reason": .string(TransitionReason.scenes.rawValue),
                            "time": .double(time),
                        ]
                    ]
                }
            }
        }
    }

    /// The reply that carries one scene callback, numbered from the app's one counter now.
    static func sceneReply(_ callback: SceneCallback, _ scene: SceneID, _ connection: SceneConnection?, _ record: inout Record) -> JSONObject {
        var event: JSONObject = [
            "seq": .int(Int64(record.lifecycle.reserveSequence())), "kind": .string(callback.kind), "scene": .string(scene.value),
        ]
        if let connection {
            event["source"] = .string(connection.source.rawValue)
            event["title"] = .string(connection.title)
            if let restored = connection.restoredState { event["restoredState"] = .string(restored) }
        }
        return ["state": .string(record.lifecycle.state.rawValue), "callback": .object(event)]
    }

    /// The scene callbacks held while the app ran no code go out as it wakes, before its events.
    func sendHeldSceneCallbacks(_ record: inout Record, in outbox: inout Outbox<AppAction>) {
        guard !record.heldSceneCallbacks.isEmpty, let attachment = record.attachment else { return }
        let held = record.heldSceneCallbacks
        record.heldSceneCallbacks = []
        outbox.add(.send(attachment.responder, held.map { Self.sceneReply($0.0, $0.1, $0.2, &record) }))
    }

    /// The app's process is gone: its scenes are unattached without a word, logged and told to monitors.
    func scenesEnded(_ app: AppName, _ record: inout Record, in state: inout State, log: inout [LogEntry]) {
        record.heldSceneCallbacks = []
        // Its windows are no scenes of it any more: the process that attaches next makes them its own again.
        for (reporter, shown) in state.windows.scenes where shown.values.contains(where: { $0.app == app }) {
            let kept = shown.filter { $0.value.app != app }
            state.windows.scenes[reporter] = kept.isEmpty ? nil : kept
        }
        guard !record.scenes.scenes.isEmpty else { return }
        let effects = record.scenes.processEnded().filter { if case .presence = $0 { false } else { true } }
        self.carryOutScenes(effects, of: app, in: &state, log: &log)
    }

    static func sceneTransitionEntry(app: AppName, scene: SceneID, from: SceneState, to: SceneState) -> LogEntry {
        LogEntry(
            level: .info,
            message: "\(app): scene \(scene) \(from.rawValue) → \(to.rawValue)",
            metadata: [
                "app": "\(app)", "scene": "\(scene)", "from": "\(from.rawValue)", "to": "\(to.rawValue)",
                "message_id": "\(MessageID.transition)",
            ]
        )
    }
}
