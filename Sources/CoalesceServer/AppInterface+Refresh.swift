import CoalesceCore
import Varlink

/// `io.coalesced.App`'s background refreshes: ScheduleRefresh, CancelRefresh, ListRefreshes and RefreshDone, each
/// checked here and decided by the ``RefreshScheduler``.
extension AppInterface {
    static let maximumRefreshIDLength = 64
    /// The widest window a refresh may ask for: a day.
    static let maximumFlex = Duration.seconds(86_400)

    static func refreshMethods(_ refreshes: RefreshScheduler, wall: @escaping @Sendable () -> Double) -> [String: VarlinkMethod] {
        [
            // Runs as a task: it waits for the store's commit.
            "ScheduleRefresh": .streaming { request, responder in
                let peer = try self.peer(request)
                let parameters = request.call.parameters
                let id = try self.refreshID(request)
                let earliest: Double
                let now = wall()
                let year = 366.0 * 86_400
                switch (parameters["earliest"]?.doubleValue, parameters["after"]?.doubleValue) {
                case (let at?, nil):
                    guard at.isFinite, abs(at - now) <= year else {
                        throw VarlinkError.invalidParameter("earliest", reason: "seconds since the epoch, within a year of now")
                    }
                    earliest = at
                case (nil, let after?):
                    guard after.isFinite, after >= 0, after <= year else {
                        throw VarlinkError.invalidParameter("after", reason: "seconds from now, 0 to a year")
                    }
                    earliest = now + after
                case (nil, nil): earliest = now
                case (_?, _?): throw VarlinkError.invalidParameter("after", reason: "give earliest or after, not both")
                }
                let interval = try self.seconds(parameters["intervalSec"], "intervalSec", allowZero: false)
                let refresh = RefreshRequest(
                    id: id,
                    earliest: earliest,
                    interval: interval,
                    flex: try self.seconds(parameters["flexSec"], "flexSec", allowZero: true, atMost: Self.maximumFlex) ?? .seconds(60),
                    requires: try self.conditions(parameters["requires"]),
                    budget: try self.seconds(parameters["budgetSec"], "budgetSec", allowZero: false) ?? refreshes.currentSettings.maxBudget,
                    late: try self.latePolicy(parameters["late"])
                )
                let status = try await refreshes.schedule(
                    app: try request.string("app"), uid: peer.uid, request: refresh, keep: try self.flag(parameters["keep"], "keep")
                )
                responder.finish(["refresh": .object(self.refreshObject(status))])
            },
            // Runs as a task: it waits for the store's commit.
            "CancelRefresh": .streaming { request, responder in
                let peer = try self.peer(request)
                try await refreshes.cancel(app: try request.string("app"), uid: peer.uid, id: try self.refreshID(request))
                responder.finish()
            },
            "ListRefreshes": .immediate { request in
                let peer = try self.peer(request)
                let statuses = try refreshes.list(app: try request.string("app"), uid: peer.uid)
                return ["refreshes": .array(statuses.map { .object(self.refreshObject($0)) })]
            },
            // Runs as a task: it waits for the store's commit.
            "RefreshDone": .streaming { request, responder in
                let peer = try self.peer(request)
                guard let success = request.call.parameters["success"]?.boolValue else {
                    throw VarlinkError.invalidParameter("success", reason: "expected a bool")
                }
                try await refreshes.done(app: try request.string("app"), uid: peer.uid, id: try self.refreshID(request), success: success)
                responder.finish()
            },
        ]
    }

    /// A refresh as the interface's Refresh type has it.
    static func refreshObject(_ status: RefreshScheduler.RefreshStatus) -> JSONObject {
        let request = status.task.request
        var object: JSONObject = [
            "id": .string(request.id),
            "earliest": .double(request.earliest),
            "due": .double(status.task.due),
            "flexSec": .double(request.flex.seconds),
            "requires": .array(request.requires.sorted().map { .string($0.rawValue) }),
            "budgetSec": .double(request.budget.seconds),
            "late": .string(request.late.rawValue),
            "failures": .int(Int64(status.task.failures)),
            "waitingFor": .array(status.unmet.map { .string($0.rawValue) }),
        ]
        if let interval = request.interval { object["intervalSec"] = .double(interval.seconds) }
        if let lastRun = status.task.lastRun { object["lastRun"] = .double(lastRun) }
        if let outcome = status.task.lastOutcome { object["lastOutcome"] = .string(outcome.rawValue) }
        if let ends = status.runEnds { object["runningUntil"] = .double(ends) }
        return object
    }

    private static func refreshID(_ request: VarlinkRequest) throws(VarlinkError) -> String {
        let id = try request.string("id")
        guard !id.isEmpty, id.utf8.count <= Self.maximumRefreshIDLength else {
            throw .invalidParameter("id", reason: "a refresh's id is 1 to \(Self.maximumRefreshIDLength) bytes")
        }
        if let problem = ControlCharacters.problem(inName: id, field: "the refresh's id") {
            throw .invalidParameter("id", reason: problem)
        }
        return id
    }

    /// A number of seconds given as `name`; `nil` when left out.
    private static func seconds(
        _ value: JSONValue?, _ name: String, allowZero: Bool, atMost: Duration = .seconds(366 * 86_400)
    ) throws(VarlinkError) -> Duration? {
        guard let value, value != .null else { return nil }
        guard let seconds = value.doubleValue, seconds.isFinite else { throw .invalidParameter(name, reason: "expected a number of seconds") }
        guard seconds > 0 || (allowZero && seconds == 0) else {
            throw .invalidParameter(name, reason: allowZero ? "must not be negative" : "must be more than zero")
        }
        let duration = RefreshTask.duration(seconds: seconds)
        guard duration <= atMost else { throw .invalidParameter(name, reason: "at most \(atMost.components.seconds) s") }
        guard allowZero || duration > .zero else { throw .invalidParameter(name, reason: "at least a millisecond") }
        return duration
    }

    private static func conditions(_ value: JSONValue?) throws(VarlinkError) -> Set<RefreshCondition> {
        guard let value, value != .null else { return [] }
        guard let elements = value.arrayValue else { throw .invalidParameter("requires", reason: "expected an array of string") }
        var conditions: Set<RefreshCondition> = []
        for (index, element) in elements.enumerated() {
            guard let name = element.stringValue, let condition = RefreshCondition(rawValue: name) else {
                throw .invalidParameter(
                    "requires[\(index)]", reason: "expected one of \(RefreshCondition.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            conditions.insert(condition)
        }
        return conditions
    }

    private static func latePolicy(_ value: JSONValue?) throws(VarlinkError) -> RefreshLatePolicy {
        guard let value, value != .null else { return .runOnce }
        guard let text = value.stringValue, let policy = RefreshLatePolicy(rawValue: text) else {
            throw .invalidParameter("late", reason: "expected runOnce or skip")
        }
        return policy
    }
}
