import ArgumentParser
import Varlink

struct Refreshes: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List an app's scheduled background refreshes (io.coalesced.App.ListRefreshes).",
        discussion: "DUE is when its window opens; WAITING FOR, the conditions it requires that do not hold now."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.App.ListRefreshes", ["app": .string(self.name)]) else { return }
        let refreshes = reply["refreshes"]?.arrayValue ?? []
        let rows = refreshes.map { refresh -> [String] in
            let requires = (refresh["requires"]?.arrayValue ?? []).compactMap(\.stringValue)
            let waiting = (refresh["waitingFor"]?.arrayValue ?? []).compactMap(\.stringValue)
            let state: String
            if let until = refresh["runningUntil"]?.doubleValue {
                state = "running until \(CtlOutput.timestamp(until))"
            } else if let outcome = refresh["lastOutcome"]?.stringValue {
                state = outcome + ((refresh["failures"]?.intValue ?? 0) > 0 ? " (\(refresh["failures"]!.intValue!) in a row)" : "")
            } else {
                state = "-"
            }
            return [
                refresh["id"]?.stringValue ?? "?",
                refresh["due"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
                refresh["intervalSec"]?.doubleValue.map(CtlOutput.seconds) ?? "once",
                requires.isEmpty ? "-" : requires.joined(separator: ","),
                waiting.isEmpty ? "-" : waiting.joined(separator: ","),
                state,
            ]
        }
        CtlOutput.table(
            header: ["ID", "DUE", "EVERY", "REQUIRES", "WAITING FOR", "LAST"], rows,
            summary: "\(rows.count) \(rows.count == 1 ? "refresh" : "refreshes") scheduled.",
            legend: !self.global.noLegend
        )
    }
}
