import CoalesceTestSupport
import Foundation
import Varlink

/// An app with Wayland windows (Tests/Clients/wl-window.c): one process that opens a window per title and attaches
/// to the daemon, printing each reply of its stream as a line.
final class WaylandApp: @unchecked Sendable {
    let name: String
    let process: WatchedProcess
    private var read = 0

    init(_ sway: SwaySession, socket: String, app: String, titles: [String]) throws {
        self.name = app
        self.process = try WatchedProcess(try WaylandWindowClient.path(), [app, socket] + titles, environment: sway.clientEnvironment)
    }

    var pid: Int32 { self.process.child.pid }

    /// The callbacks the app has been sent and not yet read, as "kind" or "scene kind" for a scene's, waiting until
    /// `count` have come.
    func callbacks(_ count: Int) throws -> [String] {
        try waitUntil("\(count) callbacks of \(self.name) after the \(self.read) read; output:\n\(self.process.output.joined(separator: "\n"))") {
            () throws -> [String]? in
            let all = try self.process.output.compactMap { line -> String? in
                let reply = try JSONParser.parse(line)
                guard let callback = reply["parameters"]?["callback"], let kind = callback["kind"]?.stringValue else { return nil }
                let name = kind.split(separator: ".").last.map(String.init) ?? kind
                if name == "willConnect", let scene = callback["scene"]?.stringValue, self.titles[scene] == nil,
                    let title = callback["title"]?.stringValue, !title.isEmpty
                {
                    self.titles[scene] = title
                }
                return callback["scene"]?.stringValue.map { "\(self.title(ofScene: $0)) \(name)" } ?? name
            }
            guard all.count >= self.read + count else { return nil }
            defer { self.read += count }
            return Array(all[self.read..<self.read + count])
        }
    }

    /// The highest sequence number the app has been sent: what an Ack of everything names.
    var lastSequence: Int64 {
        self.process.output.compactMap { try? JSONParser.parse($0)["parameters"]?["callback"]?["seq"]?.intValue }.max() ?? 0
    }

    /// Scenes are named by the window system's ids; the tests name them by title, as sway's tree or the scene's
    /// willConnect says.
    var titles: [String: String] = [:]
    private func title(ofScene id: String) -> String { self.titles[id] ?? id }
}
