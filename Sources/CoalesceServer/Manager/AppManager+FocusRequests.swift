import CoalesceCore
import Varlink

/// An operator focuses one of an app's scenes: the daemon cannot move a window itself, so it asks the session that
/// shows it, through the stream its screen agent keeps open (`io.coalesced.Screen.FocusRequests`). The scene, and
/// the app with it, become active when the agent reports the window focused, as for a focus the user gave.
extension AppManager {
    /// Keeps `responder` as the stream the agent reporting `uid`'s windows through `source` takes focus requests
    /// on, until its client goes.
    func followFocusRequests(source: SceneSource, uid: UInt32, responder: VarlinkResponder) async {
        let id = self.decide { state, _ in
            let id = state.nextID
            state.nextID += 1
            state.windows.addFocusStream(id, responder, of: WindowBook.Reporter(uid: uid, source: source))
            state.parks.open(id)
            // The first reply says the stream is taken: a request decided after it goes to it.
            state.outbox.add(.send(responder, [[:]]))
            return id
        }
        switch await self.park(id) {
        case .overrun, .replaced, .closed, .finished: responder.finish()
        }
    }

    /// Asks the session that shows the app's scene `scene` to focus its window.
    /// - Returns: the app as it is when the request goes out.
    func focus(name: String, scene: String) throws(SystemError) -> Snapshot {
        let appName = try Self.systemAppName(name)
        return try self.decide { state, _ throws(SystemError) in
            guard let record = state.records[appName] else { throw .noSuchApp(app: name) }
            guard let id = try? SceneID(scene), record.scenes.scenes[id] != nil else { throw .noSuchScene(app: name, scene: scene) }
            guard let reporter = state.windows.reporter(showing: id, of: appName, owner: record.registration.owner) else {
                throw .sceneNotFocusable(app: name, scene: scene, reason: "no session reports it as a window it shows")
            }
            guard let streams = state.windows.focusStreams[reporter], !streams.isEmpty else {
                throw .sceneNotFocusable(
                    app: name, scene: scene,
                    reason: "no screen agent of the session that shows it (uid \(reporter.uid), \(reporter.source.rawValue)) "
                        + "takes focus requests; is coalesce-screen-agent running there, and as new as the daemon?"
                )
            }
            for (_, responder) in streams.sorted(by: { $0.key < $1.key }) {
                state.outbox.add(.send(responder, [["window": .string(id.value)]]))
            }
            return record.snapshot
        }
    }
}
