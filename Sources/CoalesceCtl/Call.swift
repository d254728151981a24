import ArgumentParser
import Varlink

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call any method and print its reply, like varlinkctl call.",
        discussion: "Example: coalescectl call org.varlink.service.GetInterfaceDescription '{\"interface\":\"io.coalesced.System\"}'"
    )

    @OptionGroup(title: "Global Options") var global: GlobalOptions

    @Argument(help: "The fully qualified method, such as io.coalesced.System.Stats.")
    var method: String

    @Argument(help: "The parameters as a JSON object.")
    var parameters: String = "{}"

    @Flag(help: "Accept a stream of replies (the call's 'more' flag).")
    var more = false

    @Flag(help: "Ask for no reply (the call's 'oneway' flag).")
    var oneway = false

    func validate() throws {
        guard VarlinkNames.isValidQualifiedMethod(self.method) else {
            throw ValidationError("'\(self.method)' is not a method name like io.coalesced.System.Stats")
        }
        guard case .object? = try? JSONParser.parse(self.parameters) else {
            throw ValidationError("parameters must be a JSON object, such as '{\"interface\":\"io.coalesced.System\"}'")
        }
        if self.more && self.oneway { throw ValidationError("--more and --oneway exclude each other") }
    }

    func run() throws {
        let parameters = (try? JSONParser.parse(self.parameters))?.objectValue ?? [:]  // validated above
        let client = self.global.connect()
        if self.oneway {
            CtlOutput.perform { try client.send(VarlinkCall(method: self.method, parameters: parameters, oneway: true)) }
            return
        }
        if self.more {
            CtlOutput.perform { try client.callMore(self.method, parameters) { self.show($0) } }
        } else {
            client.setReceiveTimeout(.seconds(30))
            self.show(CtlOutput.perform { try client.call(self.method, parameters) })
        }
    }

    private func show(_ reply: JSONObject) {
        // For people, varlinkctl's way: indented JSON.
        CtlOutput.print(self.global.format == .json ? JSONValue.object(reply).jsonText : JSONValue.object(reply).prettyText())
    }
}
