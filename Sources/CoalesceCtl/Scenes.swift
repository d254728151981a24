import ArgumentParser
import Varlink

struct Scenes: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List an app's scenes: the windows of it its user's session reports (io.coalesced.System.GetApp)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name, such as org.example.mail.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.System.GetApp", ["app": .string(self.name)]) else { return }
        let scenes = reply["app"]?["scenes"]?.arrayValue ?? []
        let rows = scenes.map { scene in
            [
                scene["id"]?.stringValue ?? "?", scene["state"]?.stringValue ?? "?", scene["source"]?.stringValue ?? "?",
                scene["title"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } ?? "-",
            ]
        }
        CtlOutput.table(
            header: ["SCENE", "STATE", "SOURCE", "TITLE"], rows,
            summary: "\(scenes.count) \(scenes.count == 1 ? "scene" : "scenes") listed.", legend: !self.global.noLegend
        )
    }
}
