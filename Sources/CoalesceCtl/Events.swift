import ArgumentParser
import CoalesceCore
import CoalesceWire
import Varlink

struct Post: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Post an event to an app (io.coalesced.App.Post).",
        discussion: "Prints 'delivered' when the app received it at once, 'held' when it waits, coalesced, for the app to wake."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app to post to, or topic:NAME for every app subscribed to NAME.", completion: AppNameCompletion.kind)
    var target: String

    @Argument(help: "The event's kind, such as mail.received.")
    var kind: String

    @Argument(help: "The payload: a JSON object.")
    var payload: String = "{}"

    @Option(help: "The policy for this post when it opens the kind: latest, first, count, sum:FIELD, merge, netChange or queue:BOUND.")
    var policy: String?

    func run() throws {
        let payload: JSONValue
        do {
            payload = try JSONParser.parse(self.payload)
        } catch {
            throw ValidationError("the payload is not JSON: \(error)")
        }
        var parameters: JSONObject = ["target": .string(self.target), "kind": .string(self.kind), "payload": payload]
        if let text = self.policy {
            let policy: CoalescingPolicy
            do { policy = try CoalescingPolicy(parsing: text) } catch { throw ValidationError("--policy: \(error)") }
            parameters["policy"] = policy.wire
        }
        guard let reply = self.global.call("io.coalesced.App.Post", parameters) else { return }
        let outcome = reply["delivered"]?.boolValue == true ? "delivered" : "held"
        let recipients = reply["recipients"]?.intValue ?? 1
        CtlOutput.print(recipients == 1 ? outcome : "\(outcome) (\(recipients) apps)")
    }
}

struct Queue: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what an app holds while it receives nothing (io.coalesced.System.GetQueue)."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The app's name.", completion: AppNameCompletion.kind)
    var name: String

    func run() throws {
        self.global.paged()
        guard let reply = self.global.call("io.coalesced.System.GetQueue", ["app": .string(self.name)]) else { return }
        var rows: [[String]] = []
        for held in reply["held"]?.arrayValue ?? [] {
            let policy = held["policy"] ?? .null
            // A policy this coalescectl does not know (a newer daemon's) still shows its name.
            let policyText = CoalescingPolicy(wire: policy)?.text ?? policy["policy"]?.stringValue ?? "?"
            rows.append([
                held["kind"]?.stringValue ?? "?", policyText, held["count"]?.intValue.map { String($0) } ?? "?",
                held["firstPosted"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
                held["lastPosted"]?.doubleValue.map(CtlOutput.timestamp) ?? "-",
            ])
        }
        let kinds = rows.count
        let unacknowledged = reply["unacknowledged"]?.intValue ?? 0
        CtlOutput.table(
            header: ["KIND", "POLICY", "COUNT", "FIRST", "LAST"], rows,
            summary: "\(kinds) \(kinds == 1 ? "kind" : "kinds") held; \(unacknowledged) sent and not acknowledged.",
            legend: !self.global.noLegend
        )
    }
}
