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
        #expect(Self.files == ["io.coalesced.App.varlink", "io.coalesced.Protocol.varlink", "io.coalesced.System.varlink"])
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
            .messageTooLarge(limit: 1), .invalidMessage(""), .tooManyConnections(limit: 1), .internalError(""),
        ]
        #expect(description.name == ProtocolInterface.name)
        #expect(Set(sent.map { $0.varlinkError(in: ProtocolInterface.name).varlinkName.replacingOccurrences(of: description.name + ".", with: "") }) == description.errors)
    }
}
