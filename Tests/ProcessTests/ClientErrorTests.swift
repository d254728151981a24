@testable import CoalesceClient
import Foundation
import Testing
import Varlink

/// `CoalescedError` has a case for every error of io.coalesced.App and io.coalesced.Notifications, so that an app
/// matches each by its case, not by a name in `refused`: the files the daemon serves are the list.
@Suite struct ClientErrorTests {
    static func description(of interface: String) throws -> VarlinkInterfaceDescription {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/CoalesceServer/Interfaces/\(interface).varlink")
        return try VarlinkInterfaceDescription(text: try String(contentsOf: file, encoding: .utf8))
    }

    /// Every parameter any of the interfaces' errors declares, with a value of its declared type.
    static let parameters: JSONObject = {
        let integers: Set<String> = ["id", "limit", "size", "uid", "seq", "next", "count", "pending"]
        var parameters: JSONObject = [:]
        for key in ["name", "app", "reason", "limit", "state", "id", "unit", "kind", "mode", "size", "target", "field",
                    "quota", "uid", "seq", "next", "topic", "parameter", "count", "pending", "action"] {
            parameters[key] = integers.contains(key) ? .int(1) : .string("x")
        }
        return parameters
    }()

    static func expectEachErrorHasItsOwnCase(_ interface: String, _ description: VarlinkInterfaceDescription, parameters: JSONObject) {
        for name in description.errors.sorted() {
            let qualified = interface + "." + name
            let error = CoalescedError(VarlinkError(name: qualified, parameters: parameters))
            #expect(error.daemonErrorName == qualified, "\(qualified) arrives as \(error)")
            if case .refused = error { Issue.record("\(qualified) has no case of its own") }
        }
    }

    @Test func everyErrorOfTheAppInterfaceHasItsOwnCase() throws {
        let description = try Self.description(of: "io.coalesced.App")
        #expect(description.errors.contains("InvalidPolicy") && description.errors.contains("SequenceNotSent"))
        Self.expectEachErrorHasItsOwnCase("io.coalesced.App", description, parameters: Self.parameters)
    }

    @Test func everyErrorOfTheNotificationsInterfaceHasItsOwnCase() throws {
        let description = try Self.description(of: "io.coalesced.Notifications")
        #expect(description.errors.contains("PendingLimit") && description.errors.contains("UnknownAction"))
        // Notifications' ids are strings.
        var parameters = Self.parameters
        parameters["id"] = "x"
        Self.expectEachErrorHasItsOwnCase("io.coalesced.Notifications", description, parameters: parameters)
        let limit = CoalescedError(
            VarlinkError(name: "io.coalesced.Notifications.PendingLimit", parameters: ["app": "org.example.notes", "limit": 2, "pending": 2])
        )
        #expect(limit == .pendingLimit(app: "org.example.notes", limit: 2, pending: 2))
        // The two StorageFailed errors stay apart.
        let app = CoalescedError(VarlinkError(name: "io.coalesced.App.StorageFailed", parameters: ["reason": "disk full"]))
        let notifications = CoalescedError(VarlinkError(name: "io.coalesced.Notifications.StorageFailed", parameters: ["reason": "disk full"]))
        #expect(app == .storageFailed(reason: "disk full") && notifications == .notificationStorageFailed(reason: "disk full"))
    }
}
