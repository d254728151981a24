import CoalesceCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Systemd
import CoalesceStore
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Monitors and parked streams: who watches transitions, and how a streaming call waits for its end.
extension AppManager {
    /// Serves a Monitor until its client hangs up or stops reading.
    func monitor(responder: VarlinkResponder) async throws(SystemError) {
        let id = self.state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.monitors[id] = responder
            state.parks[id] = Park()
            responder.send([:])
            return id
        }
        switch await self.park(id) {
        case .overrun: responder.failAndClose(SystemError.monitorOverrun(bound: Self.monitorBacklogBound))
        case .replaced, .closed, .finished: responder.finish()
        }
    }

    func tellMonitors(
        app: AppName,
        from: AppState,
        to: AppState,
        reason: TransitionReason,
        time: Double,
        state: inout State
    ) {
        guard !state.monitors.isEmpty else { return }
        let reply: JSONObject = [
            "transition": [
                "app": .string(app.value), "from": .string(from.rawValue), "to": .string(to.rawValue),
                "reason": .string(reason.rawValue), "time": .double(time),
            ]
        ]
        for (id, monitor) in state.monitors {
            if monitor.backlog > Self.monitorBacklogBound {
                state.monitors[id] = nil
                self.endPark(id, .overrun, in: &state)
            } else {
                monitor.send(reply)
            }
        }
    }

    /// Ends an app's stream with its last reply: the app is not running any more.
    func endStream(_ attachment: Attachment, in state: inout State) {
        state.attached[attachment.id] = nil
        attachment.responder.finish(["state": "notRunning"])
        self.endPark(attachment.id, .finished, in: &state)
    }

    // MARK: Parked streams

    func park(_ id: Int) async -> StreamEnd {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<StreamEnd, Never>) in
                self.state.withLock { state in
                    if let end = state.parks[id]?.end {
                        state.parks[id] = nil
                        continuation.resume(returning: end)
                    } else {
                        state.parks[id]?.continuation = continuation
                    }
                }
            }
        } onCancel: {
            // Cancellation can run inside a write this manager makes under its lock (a write to a peer that is gone
            // closes the channel at once, and closing cancels the call's task): take the lock later, on the loop.
            self.eventLoop.execute { self.streamClosed(id) }
        }
    }

    /// A parked stream's client went away. For an attached app that means its process is gone, unless the daemon
    /// is stopping and closed the stream itself: then the app keeps its state (as recorded) for the next start.
    func streamClosed(_ id: Int) {
        self.locked { state, log in
            state.monitors[id] = nil
            if let appName = state.attached.removeValue(forKey: id), state.records[appName]?.attachment?.id == id {
                state.records[appName]!.attachment = nil
                if !state.stopping {
                    let now = self.now()
                    self.input(appName, in: &state, log: &log) { lifecycle in lifecycle.processExited(now: now) }
                }
            }
            self.endPark(id, .closed, in: &state)
        }
    }

    func endPark(_ id: Int, _ end: StreamEnd, in state: inout State) {
        guard var park = state.parks[id] else { return }
        if let continuation = park.continuation {
            state.parks[id] = nil
            continuation.resume(returning: end)
        } else if park.end == nil {
            park.end = end
            state.parks[id] = park
        }
    }
}
