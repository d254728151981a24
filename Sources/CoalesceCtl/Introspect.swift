import ArgumentParser
import Varlink

struct Introspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the daemon's interfaces, or print one interface's definition."
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "An interface name, such as io.coalesced.System.")
    var interface: String?

    func run() throws {
        self.global.paged()
        if let interface = self.interface {
            let parameters: JSONObject = ["interface": .string(interface)]
            guard let reply = self.global.call("org.varlink.service.GetInterfaceDescription", parameters) else {
                return
            }
            let text = reply["description"]?.stringValue ?? ""
            CtlOutput.print(text.hasSuffix("\n") ? String(text.dropLast()) : text)
            return
        }
        guard let reply = self.global.call("org.varlink.service.GetInfo") else { return }
        let interfaces = reply["interfaces"]?.arrayValue?.compactMap(\.stringValue) ?? []
        var rows: [(String, String)] = [
            ("Vendor", reply["vendor"]?.stringValue ?? "?"),
            ("Product", reply["product"]?.stringValue ?? "?"),
            ("Version", reply["version"]?.stringValue ?? "?"),
            ("URL", reply["url"]?.stringValue ?? "?"),
        ]
        for (index, name) in interfaces.enumerated() {
            rows.append((index == 0 ? "Interfaces" : "", name))
        }
        CtlOutput.print(CtlOutput.table(rows).replacingBlankLabels())
    }
}

extension String {
    /// Continuation rows of a table have no label and no colon.
    fileprivate func replacingBlankLabels() -> String {
        self.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            let trimmed = line.drop { $0 == " " }
            return trimmed.hasPrefix(": ") ? String(repeating: " ", count: line.count - trimmed.count + 2) + trimmed.dropFirst(2) : String(line)
        }.joined(separator: "\n")
    }
}
