@testable import CoalesceClient
import Foundation
import Testing
import Varlink

/// `CoalescedError` has a case for every error of io.coalesced.App, so that an app matches each by its case, not by
/// a name in `refused`: the file the daemon serves is the list.
@Suite struct ClientErrorTests {
    @Test func everyErrorOfTheAppInterfaceHasItsOwnCase() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/CoalesceServer/Interfaces/io.coalesced.App.varlink")
        let description = try VarlinkInterfaceDescription(text: try String(contentsOf: file, encoding: .utf8))
        #expect(description.errors.contains("InvalidPolicy") && description.errors.contains("SequenceNotSent"))
        // Every parameter any of the interface's errors declares, with a value of its declared type.
        let integers: Set<String> = ["id", "limit", "size", "uid", "seq", "next", "count"]
        var parameters: JSONObject = [:]
        for key in ["name", "app", "reason", "limit", "state", "id", "unit", "kind", "mode", "size", "target", "field",
                    "quota", "uid", "seq", "next", "topic", "parameter", "count"] {
            parameters[key] = integers.contains(key) ? .int(1) : .string("x")
        }
        for name in description.errors.sorted() {
            let qualified = "io.coalesced.App." + name
            let error = CoalescedError(VarlinkError(name: qualified, parameters: parameters))
            #expect(error.daemonErrorName == qualified, "\(qualified) arrives as \(error)")
            if case .refused = error { Issue.record("\(qualified) has no case of its own") }
        }
    }
}
