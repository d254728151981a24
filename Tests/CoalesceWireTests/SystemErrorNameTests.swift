import CoalesceWire
import Foundation
import Testing
import Varlink

/// The errors of io.coalesced.System are listed once, in CoalesceWire, as its interface file declares them (the
/// App and Notifications lists are checked with the client library's cases, in ClientErrorTests).
@Suite struct SystemErrorNameTests {
    static let interfaces = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/CoalesceServer/Interfaces")

    /// Each error the file declares, by name: its parameters' names, in order.
    static func declaredErrors(of interface: String) throws -> [String: [String]] {
        let text = try String(contentsOf: Self.interfaces.appendingPathComponent(interface + ".varlink"), encoding: .utf8)
        var declared: [String: [String]] = [:]
        // `error Name (first: type, second: ?type)`, each on one line.
        for line in text.split(separator: "\n") where line.hasPrefix("error ") {
            let name = String(line.dropFirst("error ".count).prefix { $0 != " " && $0 != "(" })
            let inside = line.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
            declared[name] = inside.split(separator: ",").map { $0.split(separator: ":")[0].trimmingCharacters(in: .whitespaces) }
        }
        // Every error the interface parser finds, so that none is missed for being written across lines.
        #expect(Set(declared.keys) == (try VarlinkInterfaceDescription(text: text)).errors)
        return declared
    }

    @Test func theSystemErrorsListedAreTheOnesItsFileDeclares() throws {
        let declared = try Self.declaredErrors(of: SystemErrorName.interface)
        #expect(declared["NoSuchApp"] == ["app"] && declared["NoForegroundApp"] == [])
        let listed = Dictionary(uniqueKeysWithValues: SystemErrorName.allCases.map { ($0.rawValue, $0.parameters.map(\.rawValue)) })
        #expect(listed == declared)
    }

    @Test func theScreenErrorsListedAreTheOnesItsFileDeclares() throws {
        let declared = try Self.declaredErrors(of: ScreenErrorName.interface)
        let listed = Dictionary(uniqueKeysWithValues: ScreenErrorName.allCases.map { ($0.rawValue, $0.parameters.map(\.rawValue)) })
        #expect(listed == declared)
    }

    @Test func aQualifiedNameReadsBackOnlyInItsOwnInterface() {
        #expect(SystemErrorName.watchExists.qualified == "io.coalesced.System.WatchExists")
        #expect(SystemErrorName(qualified: "io.coalesced.System.StorageFailed") == .storageFailed)
        #expect(SystemErrorName(qualified: "io.coalesced.App.StorageFailed") == nil)
        #expect(AppErrorName(qualified: "io.coalesced.System.WrongState") == nil)
    }

    @Test func theProtocolErrorsAreNamedInTheInterfaceItsFileDeclares() throws {
        let file = Self.interfaces.appendingPathComponent(ProtocolErrorInterface.name + ".varlink")
        let description = try VarlinkInterfaceDescription(text: try String(contentsOf: file, encoding: .utf8))
        #expect(description.name == ProtocolErrorInterface.name)
        #expect(description.errors.contains(VarlinkProtocolError.internalError("").errorName))
    }
}
