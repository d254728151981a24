import CoalesceCore
import CoalesceWire
import Varlink

/// The errors of `io.coalesced.Screen`, one case for each error its interface file declares.
enum ScreenError: Error, VarlinkErrorConvertible, Hashable {
    /// The window at `index` of a report cannot be one.
    case invalidWindow(index: Int, reason: String)

    var varlinkName: String {
        switch self {
        case .invalidWindow: ScreenErrorName.invalidWindow.qualified
        }
    }

    var varlinkParameters: JSONObject {
        switch self {
        case .invalidWindow(let index, let reason): ErrorParameter.object([.index: .int(Int64(index)), .reason: .string(reason)])
        }
    }
}

/// `io.coalesced.Screen`: a user's session reports the windows it shows, which become scenes of the user's apps
/// (`AppManager+Scenes`). Anyone may call it: a report acts only on the caller's own apps (root's on anyone's).
enum ScreenInterface {
    /// Windows in one report, at most: a session shows tens.
    static let maximumWindows = 1024
    static let maximumTitleLength = 1024

    static func make(apps: AppManager) -> VarlinkInterface {
        VarlinkInterface(
            text: InterfaceText.ioCoalescedScreen,
            methods: [
                "ReportWindows": .immediate { request in
                    guard let peer = request.peer else { throw VarlinkError.permissionDenied }
                    let source = try self.source(request)
                    let windows = try self.windows(request.call.parameters["windows"])
                    let matches = apps.reportWindows(windows, source: source, uid: peer.uid)
                    return ["windows": .array(zip(windows, matches).map(self.match))]
                },
                "FocusRequests": .streaming { request, responder in
                    guard let peer = request.peer else { throw VarlinkError.permissionDenied }
                    let source = try self.source(request)
                    guard responder.streams else { throw VarlinkError.expectedMore }
                    await apps.followFocusRequests(source: source, uid: peer.uid, responder: responder)
                },
            ]
        )
    }

    /// The window system a call names: wayland or x11.
    static func source(_ request: VarlinkRequest) throws(VarlinkError) -> SceneSource {
        let name = try request.string("source")
        guard let source = SceneSource(rawValue: name), source != .system else {
            throw VarlinkError.invalidParameter("source", reason: "'\(name)' is not one: wayland or x11")
        }
        return source
    }

    /// The report's windows, each checked: the type checker has made sure of each member's type.
    static func windows(_ value: JSONValue?) throws(ScreenError) -> [ReportedWindow] {
        let elements = value?.arrayValue ?? []
        guard elements.count <= Self.maximumWindows else {
            throw .invalidWindow(index: Self.maximumWindows, reason: "a report has at most \(Self.maximumWindows) windows")
        }
        var seen: Set<String> = []
        return try elements.enumerated().map { (index, element) throws(ScreenError) -> ReportedWindow in
            let window = try self.window(element, at: index)
            guard seen.insert(window.id.value).inserted else {
                throw .invalidWindow(index: index, reason: "window '\(window.id)' is in the report twice")
            }
            return window
        }
    }

    static func window(_ value: JSONValue, at index: Int) throws(ScreenError) -> ReportedWindow {
        func invalid(_ reason: String) -> ScreenError { .invalidWindow(index: index, reason: reason) }
        let id: SceneID
        do {
            id = try SceneID(value["id"]?.stringValue ?? "")
        } catch {
            throw invalid("its id: \(error)")
        }
        let appID = value["appId"]?.stringValue ?? ""
        guard !appID.isEmpty, appID.utf8.count <= SceneID.maximumLength else {
            throw invalid("its appId has 1 to \(SceneID.maximumLength) bytes")
        }
        if let problem = ControlCharacters.problem(inName: appID, field: "its appId") { throw invalid(problem) }
        var pid: Int32?
        if let number = value["pid"]?.intValue {
            guard let exact = Int32(exactly: number), exact > 0 else { throw invalid("its pid \(number) is no process's") }
            pid = exact
        }
        let presentationName = value["presentation"]?.stringValue ?? ""
        guard let presentation = ScenePresentation(rawValue: presentationName) else {
            throw invalid("its presentation '\(presentationName)' is not one: focused, shown or hidden")
        }
        let title = value["title"]?.stringValue ?? ""
        guard title.utf8.count <= Self.maximumTitleLength else {
            throw invalid("its title has \(title.utf8.count) bytes, more than \(Self.maximumTitleLength)")
        }
        if let byte = ControlCharacters.first(in: title) {
            throw invalid("its title contains the control character \(ControlCharacters.name(of: byte))")
        }
        return ReportedWindow(id: id, appID: appID, pid: pid, presentation: presentation, title: title)
    }

    static func match(_ window: ReportedWindow, _ match: WindowMatch) -> JSONValue {
        var object: JSONObject = ["window": .string(window.id.value)]
        switch match {
        case .scene(let app): object["app"] = .string(app.value)
        case .noApp: object["refused"] = "noApp"
        case .notRunning: object["refused"] = "notRunning"
        case .notTheAppsProcess: object["refused"] = "notTheAppsProcess"
        }
        return .object(object)
    }
}
