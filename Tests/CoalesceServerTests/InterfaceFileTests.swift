import CoalesceCore
@testable import CoalesceServer
import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// The interface files in the repository are what the daemon serves (the build embeds them), and each parses.
@Suite struct InterfaceFileTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/CoalesceServer/Interfaces")

    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".varlink") }.sorted()
    }

    @Test func everyFileIsNamedAfterItsInterfaceAndParses() throws {
        #expect(
            Self.files == [
                "io.coalesced.App.varlink", "io.coalesced.Notifications.varlink", "io.coalesced.Protocol.varlink",
                "io.coalesced.Screen.varlink", "io.coalesced.System.varlink",
            ]
        )
        for file in Self.files {
            let text = try String(contentsOf: Self.directory.appendingPathComponent(file), encoding: .utf8)
            let description = try VarlinkInterfaceDescription(text: text)
            #expect(description.name + ".varlink" == file)
        }
    }

    @Test func protocolErrorsAreTheOnesTheServerSends() throws {
        let text = try String(
            contentsOf: Self.directory.appendingPathComponent("io.coalesced.Protocol.varlink"),
            encoding: .utf8
        )
        let description = try VarlinkInterfaceDescription(text: text)
        let sent: [VarlinkProtocolError] = [
            .messageTooLarge(limit: 1), .invalidMessage(""), .tooManyConnections(.connections(limit: 1)), .internalError(""),
            .upgradeNotSupported(method: ""),
        ]
        #expect(description.name == ProtocolInterface.name)
        #expect(Set(sent.map { $0.varlinkError(in: ProtocolInterface.name).varlinkName.replacingOccurrences(of: description.name + ".", with: "") }) == description.errors)
    }

    /// One of every error each interface's Swift type can be, with its parameters.
    static let appErrors: [AppError] = [
        .invalidAppName(name: "", reason: ""), .notOwner(app: ""), .tooManyApps(limit: 1), .notRegistered(app: ""),
        .wrongState(app: "", state: .active, reason: ""), .noSuchTask(app: "", id: 1), .tooManyTasks(app: "", limit: 1),
        .launchUnitNotAllowed(app: "", unit: ""), .backgroundModeNotDeclared(app: "", kind: "", mode: ""),
        .stateTooLarge(app: "", size: 1, limit: 1), .replaced(app: ""), .unknownTarget(target: ""),
        .invalidKind(kind: "", reason: ""), .notAllowedToPost(target: ""), .tooManyKinds(target: "", limit: 1),
        .notANumber(target: "", kind: "", field: ""), .payloadTooLarge(size: 1, limit: 1), .storageFailed(reason: ""),
        .quotaExceeded(Quota(name: "UserApps", limit: 1, uid: 1)),
        .sequenceNotSent(app: "a", seq: 9, next: 5), .invalidPolicy(kind: "", reason: ""),
        .invalidTopic(topic: "", reason: ""), .invalidPosters(reason: ""), .invalidBackgroundMode(mode: "", reason: ""),
        .invalidLaunchUnit(unit: "", reason: ""), .tooManyDeclared(parameter: "kinds", count: 2, limit: 1),
        .noHandler(url: "x:", reason: ""), .ambiguousHandler(url: "x:", apps: ["a", "b"]), .launchesHeld(app: "a", failed: 3),
        .invalidRefresh(app: "a", id: "r", reason: ""), .tooManyRefreshes(app: "a", limit: 16), .noSuchRefresh(app: "a", id: "r"),
        .refreshNotRunning(app: "a", id: "r"),
    ]
    static let systemErrors: [SystemError] = [
        .noSuchApp(app: ""), .wrongState(app: "", state: .active, reason: ""), .noForegroundApp,
        .launchTimedOut(app: "", timeout: .seconds(1)), .launchFailed(app: "", unit: "", reason: ""), .nothingToPurge,
        .monitorOverrun(bound: 1), .invalidWatch(watch: "", reason: ""), .noSuchWatch(watch: "", reason: ""),
        .watchExists(watch: ""), .storageFailed(reason: ""), .noSuchScene(app: "", scene: ""),
        .sceneNotFocusable(app: "", scene: "", reason: ""),
    ]

    static let notificationErrors: [NotificationError] = [
        .unknownApp(app: ""), .notAllowed(app: ""), .invalidRequest(app: "", id: "", reason: ""),
        .pendingLimit(app: "", limit: 1, pending: 1), .quotaExceeded(Quota(name: "UserHeldBytes", limit: 1, uid: 1)),
        .unknownNotification(app: "", id: ""),
        .unknownAction(app: "", id: "", action: ""), .storageFailed(reason: ""), .agentOverrun(limit: 1),
    ]

    @Test func notificationErrorIsWhatTheNotificationsInterfaceDeclares() throws {
        try Self.expectDeclared(Self.notificationErrors, in: NotificationError.interface)
    }

    @Test func appErrorIsWhatTheAppInterfaceDeclares() throws {
        try Self.expectDeclared(Self.appErrors, in: AppError.interface)
    }

    @Test func systemErrorIsWhatTheSystemInterfaceDeclares() throws {
        try Self.expectDeclared(Self.systemErrors, in: SystemError.interface)
    }

    /// The errors' names and parameters are those the interface's file declares, no more and no fewer.
    static func expectDeclared(_ errors: [any VarlinkErrorConvertible], in interface: String) throws {
        let text = try String(contentsOf: Self.directory.appendingPathComponent(interface + ".varlink"), encoding: .utf8)
        // `error Name (first: type, second: type)`, each on one line: by name, the parameters' names.
        var declared: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("error ") {
            let name = line.dropFirst("error ".count).prefix { $0 != " " && $0 != "(" }
            let inside = line.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
            let parameters = inside.split(separator: ",").map { $0.split(separator: ":")[0].trimmingCharacters(in: .whitespaces) }
            declared[interface + "." + name] = Set(parameters)
        }
        let sent = Dictionary(errors.map { ($0.varlinkName, Set($0.varlinkParameters.keys)) }) { first, _ in first }
        #expect(sent.count == errors.count, "each case has a name of its own")
        #expect(sent == declared)
    }
}
