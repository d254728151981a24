import ArgumentParser
import Varlink

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Say why an app is in its state and what it waits for (io.coalesced.System.Explain).",
        discussion: """
            The first line is the app's state, since when and why (the transition's reason); each line after it is \
            one thing that keeps the app there or decides where it goes next: its windows on screen, an \
            interruption, an unacknowledged didEnterBackground, open background tasks, a wake's work, what it \
            holds and what would wake it.
            """
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        guard let reply = self.global.call("io.coalesced.System.Explain", ["app": .string(self.name)]) else { return }
        var first = "\(reply["app"]?.stringValue ?? self.name): \(reply["state"]?.stringValue ?? "?")"
        if let since = reply["since"]?.doubleValue { first += " since \(CtlOutput.timestamp(since))" }
        if let reason = reply["reason"]?.stringValue { first += " (\(reason))" }
        CtlOutput.print(first)
        for reason in reply["because"]?.arrayValue ?? [] {
            CtlOutput.print("  - \(reason["text"]?.stringValue ?? reason["code"]?.stringValue ?? "?")")
        }
    }
}
