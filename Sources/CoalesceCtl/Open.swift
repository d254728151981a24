import ArgumentParser
import CoalesceCore
import Varlink

struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Open a URL with the app that handles it (io.coalesced.App.Open), as xdg-open does.",
        discussion: """
            The app is the one among yours (root: among all) that declares the URL's scheme, or with --type that MIME \
            type, at registration or in its desktop file; --app chooses where several do. A running app gets it at \
            once; a suspended one is brought forward (woken into the background with --background); a stopped one is \
            launched with it. Prints the app and its state.
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The URL, such as mailto:someone@example.org.")
    var url: String

    @Option(help: "The app to open it with, where several handle it.", completion: AppNameCompletion.kind)
    var app: String?

    @Option(help: "The MIME type to open it as (a document), such as text/calendar.")
    var type: String?

    @Flag(help: "Wake or launch the app into the background instead of bringing it forward.")
    var background = false

    func run() throws {
        var parameters: JSONObject = ["url": .string(self.url), "background": .bool(self.background)]
        if let app = self.app { parameters["app"] = .string(app) }
        if let type = self.type { parameters["type"] = .string(type) }
        guard let reply = self.global.call("io.coalesced.App.Open", parameters) else { return }
        let app = reply["app"]?.stringValue ?? "?"
        if reply["launching"]?.boolValue == true {
            CtlOutput.print("\(app): launching (it gets the URL once it has launched)")
        } else {
            CtlOutput.print("\(app): \(reply["state"]?.stringValue ?? "?")")
        }
    }
}
