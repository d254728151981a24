@testable import CoalesceClient
import CoalesceWire
import Foundation
import Testing
import Varlink

/// The errors of io.coalesced.App and io.coalesced.Notifications are listed once, in CoalesceWire, for the daemon
/// and this library: the list is what the interface files the daemon serves declare, and `CoalescedError` has a case
/// for each, so that an app matches each by its case, not by a name in `refused`.
@Suite struct ClientErrorTests {
    static func file(of interface: String) throws -> String {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/CoalesceServer/Interfaces/\(interface).varlink")
        return try String(contentsOf: file, encoding: .utf8)
    }

    /// Each error the file declares, by name: its parameters' names and types, in order.
    static func declaredErrors(of interface: String) throws -> [String: [(name: String, type: String)]] {
        let text = try Self.file(of: interface)
        var declared: [String: [(name: String, type: String)]] = [:]
        // `error Name (first: type, second: ?type)`, each on one line.
        for line in text.split(separator: "\n") where line.hasPrefix("error ") {
            let name = String(line.dropFirst("error ".count).prefix { $0 != " " && $0 != "(" })
            let inside = line.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
            declared[name] = inside.split(separator: ",").map { field in
                let parts = field.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
                return (parts[0], parts.count > 1 ? parts[1] : "")
            }
        }
        // Every error the interface parser finds, so that none is missed for being written across lines.
        #expect(Set(declared.keys) == (try VarlinkInterfaceDescription(text: text)).errors)
        return declared
    }

    /// A value of each declared parameter's type.
    static func parameters(_ fields: [(name: String, type: String)]) -> JSONObject {
        JSONObject(fields.map { field in (field.name, field.type.hasSuffix("int") ? .int(1) : .string("x")) })
    }

    static func expectEachErrorHasItsOwnCase(_ errors: [(qualified: String, parameters: JSONObject)]) {
        for (qualified, parameters) in errors {
            let error = CoalescedError(VarlinkError(name: qualified, parameters: parameters))
            #expect(error.daemonErrorName == qualified, "\(qualified) arrives as \(error)")
            if case .refused = error { Issue.record("\(qualified) has no case of its own") }
        }
    }

    @Test func theAppErrorsListedAreTheOnesItsFileDeclares() throws {
        let declared = try Self.declaredErrors(of: AppErrorName.interface)
        #expect(declared["InvalidPolicy"] != nil && declared["SequenceNotSent"] != nil)
        let listed = Dictionary(uniqueKeysWithValues: AppErrorName.allCases.map { ($0.rawValue, $0.parameters.map(\.rawValue)) })
        #expect(listed == declared.mapValues { $0.map(\.name) })
    }

    @Test func theNotificationErrorsListedAreTheOnesItsFileDeclares() throws {
        let declared = try Self.declaredErrors(of: NotificationErrorName.interface)
        #expect(declared["PendingLimit"] != nil && declared["UnknownAction"] != nil)
        let listed = Dictionary(
            uniqueKeysWithValues: NotificationErrorName.allCases.map { ($0.rawValue, $0.parameters.map(\.rawValue)) }
        )
        #expect(listed == declared.mapValues { $0.map(\.name) })
    }

    @Test func everyErrorOfTheAppInterfaceHasItsOwnCase() throws {
        let declared = try Self.declaredErrors(of: AppErrorName.interface)
        Self.expectEachErrorHasItsOwnCase(declared.map { (AppErrorName.interface + "." + $0.key, Self.parameters($0.value)) })
    }

    @Test func everyErrorOfTheNotificationsInterfaceHasItsOwnCase() throws {
        let declared = try Self.declaredErrors(of: NotificationErrorName.interface)
        Self.expectEachErrorHasItsOwnCase(
            declared.map { (NotificationErrorName.interface + "." + $0.key, Self.parameters($0.value)) }
        )
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
