import CoalesceCore
import Systemd
import Varlink

/// `io.coalesced.App`: an app acting for itself.
enum AppInterface {
    static let maximumModes = 32
    static let maximumModeLength = 64
    static let maximumTaskNameLength = 64

    static func make(apps: AppManager, daemon: DaemonState, refreshes: RefreshScheduler) -> VarlinkInterface {
        VarlinkInterface(
            text: InterfaceText.ioCoalescedApp,
            methods: [
                // Runs as a task: it waits for the store's commit.
                "Register": .streaming { request, responder in
                    let peer = try self.peer(request)
                    let traits = AppTraits(
                        backgroundModes: try self.backgroundModes(request.call.parameters["backgroundModes"]),
                        exitsOnSuspend: try self.flag(request.call.parameters["exitsOnSuspend"], "exitsOnSuspend")
                    )
                    let declarations = try EventDeclarations(
                        kinds: request.call.parameters["kinds"],
                        posters: request.call.parameters["posters"],
                        topics: request.call.parameters["topics"]
                    )
                    let snapshot = try await apps.register(
                        name: try request.string("name"),
                        traits: traits,
                        launchUnit: try self.launchUnit(
                            request.call.parameters["launchUnit"],
                            byAdmin: Authorization.isAdmin(peer, group: daemon.configuration.adminGroup)
                        ),
                        suspension: try self.suspension(request.call.parameters["suspension"]),
                        windowIDs: try self.windowIDs(request.call.parameters["windowIds"]),
                        opens: try self.opens(
                            schemes: request.call.parameters["urlSchemes"], types: request.call.parameters["mimeTypes"]
                        ),
                        declarations: declarations,
                        keeping: (
                            kinds: (request.call.parameters["kinds"] ?? .null) == .null,
                            posters: (request.call.parameters["posters"] ?? .null) == .null,
                            topics: (request.call.parameters["topics"] ?? .null) == .null
                        ),
                        uid: peer.uid,
                        admin: Authorization.isAdmin(peer, group: daemon.configuration.adminGroup),
                        limit: daemon.configuration.maxApps
                    )
                    responder.finish(["app": self.info(snapshot)])
                },
                "Attach": .streaming { request, responder in
                    guard responder.streams else { throw VarlinkError.expectedMore }
                    var peer = try self.peer(request)
                    // The app's process, held by one pidfd while it is attached: taken from the connection now,
                    // as no other call needs one.
                    peer.process = await peer.connectedProcess()
                    let process = ProcessHandle.connected(peer)
                    peer.process = nil
                    try await apps.attach(name: try request.string("app"), peer: peer, process: process, responder: responder)
                },
                "Ack": .immediate { request in
                    let peer = try self.peer(request)
                    guard let sequence = request.call.parameters["seq"]?.intValue, let sequence = UInt64(exactly: sequence)
                    else { throw VarlinkError.invalidParameter("seq", reason: "must not be negative") }
                    try apps.acknowledge(name: try request.string("app"), uid: peer.uid, upTo: sequence)
                    return [:]
                },
                "BeginBackgroundTask": .immediate { request in
                    let peer = try self.peer(request)
                    let name = try request.string("name")
                    guard name.utf8.count <= self.maximumTaskNameLength else {
                        throw VarlinkError.invalidParameter("name", reason: "longer than \(self.maximumTaskNameLength) bytes")
                    }
                    if let problem = ControlCharacters.problem(inName: name, field: "the task's name") {
                        throw VarlinkError.invalidParameter("name", reason: problem)
                    }
                    let task = try apps.beginBackgroundTask(name: try request.string("app"), uid: peer.uid, taskName: name)
                    // No budget (BackgroundTaskBudgetSec=infinity): no remainingSec.
                    guard let remaining = task.remaining else { return ["id": .int(Int64(task.id))] }
                    return ["id": .int(Int64(task.id)), "remainingSec": .double(remaining.seconds)]
                },
                "GetBackgroundTimeRemaining": .immediate { request in
                    let peer = try self.peer(request)
                    let remaining = try apps.backgroundTimeRemaining(name: try request.string("app"), uid: peer.uid)
                    return remaining.map { ["remainingSec": .double($0.seconds)] } ?? [:]
                },
                "EndBackgroundTask": .immediate { request in
                    let peer = try self.peer(request)
                    guard let id = request.call.parameters["id"]?.intValue, let id = Int(exactly: id) else {
                        throw VarlinkError.invalidParameter("id", reason: "expected an int")
                    }
                    try apps.endBackgroundTask(name: try request.string("app"), uid: peer.uid, id: id)
                    return [:]
                },
                // Deferred: decided on the event loop in call order (so a producer's posts keep their order),
                // answered once on disk; a client's pipelined posts share the store's group commits, replies in
                // order.
                "Post": .deferred { request, reply in
                    let peer = try self.peer(request)
                    // Its type is checked with the others' (an object, kept as its text).
                    guard let payload = request.call.parameters["payload"] else {
                        throw VarlinkError.invalidParameter("payload", reason: "missing; expected an object")
                    }
                    let limit = daemon.maxPayloadSize
                    // As sent (its text), or as written out compactly where it reached us built.
                    let size: Int
                    if case .text(let text) = payload { size = text.count } else { size = payload.jsonText.utf8.count }
                    guard size <= limit else { throw AppError.payloadTooLarge(size: size, limit: limit) }
                    let kind = try request.string("kind")
                    var policy: CoalescingPolicy?
                    if let value = request.call.parameters["policy"], value != .null {
                        policy = try EventDeclarations.policy(value, kind: kind)
                    }
                    try apps.post(
                        target: try request.string("target"),
                        kind: kind,
                        payload: payload,
                        policy: policy,
                        peer: peer
                    ) { result in
                        switch result {
                        case .success(let outcome) where outcome.recipients == 1 && outcome.refused.isEmpty:
                            reply.succeed(outcome.delivered ? Self.sentToOne : Self.heldForOne)
                        case .success(let outcome):
                            var parameters: JSONObject = [
                                "delivered": .bool(outcome.delivered), "recipients": .int(Int64(outcome.recipients)),
                            ]
                            if !outcome.refused.isEmpty {
                                parameters["refused"] = .array(
                                    outcome.refused.map { app, error in
                                        [
                                            "app": .string(app.value), "error": .string(error.varlinkName),
                                            "parameters": .object(error.varlinkParameters),
                                        ]
                                    }
                                )
                            }
                            reply.succeed(parameters)
                        case .failure(let error): reply.fail(error)
                        }
                    }
                },
                // Runs as a task: it waits for the store's commit.
                "SaveState": .streaming { request, responder in
                    let peer = try self.peer(request)
                    let data = try self.savedData(request.call.parameters["data"])
                    try await apps.saveState(name: try request.string("app"), uid: peer.uid, data: data)
                    responder.finish()
                },
                // Runs as a task: it waits for the store's commit of the URL's event.
                "Open": .streaming { request, responder in
                    let peer = try self.peer(request)
                    let url = try request.string("url")
                    guard url.utf8.count <= URLHandlers.maximumURLLength else {
                        throw VarlinkError.invalidParameter(
                            "url", reason: "takes \(url.utf8.count) bytes, more than the \(URLHandlers.maximumURLLength) a URL may"
                        )
                    }
                    if let problem = ControlCharacters.problem(inName: url, field: "the URL") {
                        throw VarlinkError.invalidParameter("url", reason: problem)
                    }
                    guard let scheme = URLHandlers.scheme(of: url) else {
                        throw VarlinkError.invalidParameter(
                            "url", reason: "has no scheme: a URL begins with one and a colon, as in mailto:, https: or file:"
                        )
                    }
                    var type: String?
                    if let value = request.call.parameters["type"], value != .null {
                        guard let text = value.stringValue else { throw VarlinkError.invalidParameter("type", reason: "expected a string") }
                        if let problem = URLHandlers.problem(inMIMEType: text, wildcard: false) {
                            throw VarlinkError.invalidParameter("type", reason: problem)
                        }
                        type = text.lowercased()
                    }
                    var named: String?
                    if let value = request.call.parameters["app"], value != .null {
                        guard let text = value.stringValue else { throw VarlinkError.invalidParameter("app", reason: "expected a string") }
                        named = text
                    }
                    let opened = try await apps.open(
                        OpenedURL(url: url, opener: peer.uid, type: type),
                        target: URLHandlers.Target(scheme: scheme, type: type),
                        named: named,
                        background: try self.flag(request.call.parameters["background"], "background"),
                        admin: Authorization.isAdmin(peer, group: daemon.configuration.adminGroup),
                        desktopDirectories: DesktopFiles.directories(userInstance: CurrentProcess.effectiveUserID != 0)
                    )
                    responder.finish([
                        "app": .string(opened.snapshot.registration.name.value),
                        "state": .string(opened.snapshot.state.rawValue),
                        "launching": .bool(opened.launching),
                    ])
                },
                // Runs as a task: it waits for the store's commit.
                "SaveSceneState": .streaming { request, responder in
                    let peer = try self.peer(request)
                    let text = try request.string("scene")
                    let scene: SceneID
                    do throws(SceneIDError) {
                        scene = try SceneID(text)
                    } catch {
                        throw VarlinkError.invalidParameter("scene", reason: error.description)
                    }
                    let data = try self.savedData(request.call.parameters["data"])
                    try await apps.saveSceneState(name: try request.string("app"), uid: peer.uid, scene: scene, data: data)
                    responder.finish()
                },
            ].merging(Self.refreshMethods(refreshes, wall: apps.wall)) { own, _ in own },
            // A post's payload is stored and sent on as it came.
            parametersKeptAsText: ["Post": ["payload"]]
        )
    }

    /// An app as both interfaces describe it (`AppInfo`, `App`).
    static func info(_ snapshot: AppManager.Snapshot) -> JSONValue {
        var object: JSONObject = [
            "name": .string(snapshot.registration.name.value),
            "state": .string(snapshot.state.rawValue),
            "owner": .int(Int64(snapshot.registration.owner)),
            "backgroundModes": .array(snapshot.registration.traits.backgroundModes.sorted().map { .string($0) }),
            "exitsOnSuspend": .bool(snapshot.registration.traits.exitsOnSuspend),
            "tasks": .int(Int64(snapshot.tasks)),
            "since": .double(snapshot.since),
            "attached": .bool(snapshot.attached),
        ]
        if let unit = snapshot.registration.launchUnit { object["launchUnit"] = .string(unit) }
        if !snapshot.registration.windowIDs.isEmpty {
            object["windowIds"] = .array(snapshot.registration.windowIDs.sorted().map { .string($0) })
        }
        if !snapshot.registration.opens.schemes.isEmpty {
            object["urlSchemes"] = .array(snapshot.registration.opens.schemes.sorted().map { .string($0) })
        }
        if !snapshot.registration.opens.types.isEmpty {
            object["mimeTypes"] = .array(snapshot.registration.opens.types.sorted().map { .string($0) })
        }
        if let mode = snapshot.registration.suspension { object["suspension"] = .string(mode.rawValue) }
        if let hold = snapshot.hold { object["suspendedAs"] = .string(hold.rawValue) }
        if let pid = snapshot.pid { object["pid"] = .int(Int64(pid)) }
        return .object(object)
    }

    /// The answers of almost every post (one app, sent or held), written out once.
    private static let sentToOne = VarlinkEncodedParameters(["delivered": true, "recipients": 1])
    private static let heldForOne = VarlinkEncodedParameters(["delivered": false, "recipients": 1])

    /// SaveState's and SaveSceneState's `data`: text without NUL, or null to forget what was saved.
    private static func savedData(_ value: JSONValue?) throws(VarlinkError) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)?:
            if let problem = ControlCharacters.problem(inText: text, field: "the state") {
                throw .invalidParameter("data", reason: problem)
            }
            return text
        default: throw .invalidParameter("data", reason: "expected a string")
        }
    }

    /// The caller, as the kernel reports it: every App method acts for the caller's uid.
    static func peer(_ request: VarlinkRequest) throws(VarlinkError) -> VarlinkPeer {
        guard let peer = request.peer else { throw .permissionDenied }
        return peer
    }

    /// Register's `backgroundModes`, of the type the interface declares (the server checks that).
    private static func backgroundModes(_ value: JSONValue?) throws -> Set<String> {
        try self.names(value, "backgroundModes", limit: self.maximumModes, length: self.maximumModeLength, noun: "background mode") {
            mode, _, reason in AppError.invalidBackgroundMode(mode: mode, reason: reason)
        } ?? []
    }

    static func flag(_ value: JSONValue?, _ name: String) throws(VarlinkError) -> Bool {
        guard let value, value != .null else { return false }
        guard let flag = value.boolValue else { throw .invalidParameter(name, reason: "expected a bool") }
        return flag
    }

    /// Register's `windowIds`: left out (null) they stay as they were, [] clears them.
    private static func windowIDs(_ value: JSONValue?) throws -> Set<String>? {
        try self.names(value, "windowIds", limit: AppRegistration.maximumWindowIDs, length: AppName.maximumLength, noun: "window app id") {
            _, parameter, reason in VarlinkError.invalidParameter(parameter, reason: reason)
        }
    }

    /// A list of names Register declares (`parameter`, each a `noun`): at most `limit`, each of 1 to `length` bytes
    /// without control characters, repeats taken once; `nil` when left out. A name that is none is refused with
    /// `invalid`'s error, given the name, its parameter (`backgroundModes[2]`) and why.
    private static func names(
        _ value: JSONValue?,
        _ parameter: String,
        limit: Int,
        length: Int,
        noun: String,
        invalid: (_ name: String, _ parameter: String, _ reason: String) -> any Error
    ) throws -> Set<String>? {
        guard let value, value != .null else { return nil }
        guard let elements = value.arrayValue else {
            throw VarlinkError.invalidParameter(parameter, reason: "expected an array of string")
        }
        guard elements.count <= limit else {
            throw AppError.tooManyDeclared(parameter: parameter, count: elements.count, limit: limit)
        }
        var names: Set<String> = []
        for (index, element) in elements.enumerated() {
            let at = "\(parameter)[\(index)]"
            guard let name = element.stringValue else { throw VarlinkError.invalidParameter(at, reason: "expected a string") }
            guard !name.isEmpty, name.utf8.count <= length else {
                throw invalid(name, at, "a \(noun) is 1 to \(length) bytes; this one is \(name.utf8.count)")
            }
            if let problem = ControlCharacters.problem(inName: name, field: "the \(noun)") { throw invalid(name, at, problem) }
            names.insert(name)
        }
        return names
    }

    /// Register's `urlSchemes` and `mimeTypes`: each left out (null) stays as it was, [] clears it.
    private static func opens(schemes: JSONValue?, types: JSONValue?) throws -> (schemes: Set<String>?, types: Set<String>?) {
        func checked(_ value: JSONValue?, _ parameter: String, _ noun: String, _ problem: (String) -> String?) throws -> Set<String>? {
            let names = try self.names(value, parameter, limit: URLHandlers.maximumDeclared, length: 255, noun: noun) {
                _, parameter, reason in VarlinkError.invalidParameter(parameter, reason: reason)
            }
            for (index, name) in (value?.arrayValue ?? []).enumerated() {
                if let name = name.stringValue, let reason = problem(name) {
                    throw VarlinkError.invalidParameter("\(parameter)[\(index)]", reason: reason)
                }
            }
            return names.map { Set($0.map { $0.lowercased() }) }
        }
        return (
            try checked(schemes, "urlSchemes", "URL scheme", URLHandlers.problem(inScheme:)),
            try checked(types, "mimeTypes", "MIME type") { URLHandlers.problem(inMIMEType: $0, wildcard: true) }
        )
    }

    /// Register's `suspension`: left out (null) it stays as it was, "" gives the configuration's back.
    private static func suspension(_ value: JSONValue?) throws(VarlinkError) -> SuspensionChange {
        guard let value, value != .null else { return .keep }
        if value == "" { return .set(nil) }
        guard let name = value.stringValue, let mode = SuspensionMode(rawValue: name) else {
            throw .invalidParameter("suspension", reason: "expected \(SuspensionMode.names), or \"\" for the daemon's default")
        }
        return .set(mode)
    }

    private static func launchUnit(_ value: JSONValue?, byAdmin: Bool) throws -> LaunchUnitChange {
        guard let value, value != .null else { return .keep }
        if value == "" { return .clear }
        guard let unit = value.stringValue else { throw VarlinkError.invalidParameter("launchUnit", reason: "expected a string") }
        guard unit.hasSuffix(".service"), unit.count > ".service".count, unit.utf8.count <= 255, !unit.contains("/"),
            ControlCharacters.first(in: unit) == nil
        else {
            throw AppError.invalidLaunchUnit(
                unit: unit,
                reason: "expected the name of a service unit (NAME.service, at most 255 bytes, no '/' and no control character), or \"\" for none"
            )
        }
        return .set(unit, byAdmin: byAdmin)
    }
}
