import CoalesceCore
@testable import CoalesceServer
import CoalesceWire
import Varlink

/// The decoding of methods' parameters that needs no running daemon: Register's `kinds`, `posters` and `topics`,
/// Post's `policy`, the wire forms of CoalesceWire, and the forms the store keeps (declarations, held slots,
/// delivered events), which a damaged store hands back as arbitrary text.
///
/// The input is JSON text: the parameters of a call. Properties, beyond "no crash": what is refused is refused with
/// `InvalidParameter` naming the parameter, or with the error of ours about that parameter's content, naming the
/// member at fault (a kind of `kinds`, a topic of `topics`); whatever decodes writes out to a form that decodes to
/// the same thing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzParameters(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    let text = String(decoding: input, as: UTF8.self)
    storeForms(text)
    guard let parameters = (try? JSONParser.parse(input))?.objectValue else { return 0 }

    // Register.
    do {
        let declarations = try EventDeclarations(
            kinds: parameters["kinds"],
            posters: parameters["posters"],
            topics: parameters["topics"]
        )
        let stored = declarations.json.jsonText
        check(EventDeclarations(stored: stored) == declarations, "declarations read back from \(stored) differ")
    } catch {
        check(["kinds", "posters", "topics"].contains { names(error, $0, in: parameters) }, "\(error)")
    }

    // Post's policy, and any member read as a kind declaration, a policy or posters.
    if let value = parameters["policy"], value != .null {
        let kind = parameters["kind"]?.stringValue ?? "mail"
        do {
            let policy = try EventDeclarations.policy(value, kind: kind)
            check(CoalescingPolicy(wire: policy.wire) == policy, "\(policy) reads back as another policy")
        } catch {
            guard case .invalidPolicy(kind, let reason) = error, !reason.isEmpty else { fail("\(error)") }
        }
    }
    for (_, value) in parameters {
        if let policy = CoalescingPolicy(wire: value) {
            check(CoalescingPolicy(wire: policy.wire) == policy, "\(policy) reads back as another policy")
        }
        if let declaration = KindDeclaration(wire: value) {
            check(KindDeclaration(wire: declaration.wire) == declaration, "\(declaration) reads back as another")
        }
        if let posters = Posters(wire: value) {
            check(Posters(wire: posters.wire) == posters, "\(posters) read back as others")
        }
    }
    return 0
}

/// What the store hands back, read as each form it keeps; what reads writes out to text that reads the same.
private func storeForms(_ text: String) {
    _ = EventDeclarations(stored: text)
    if let slot = EventCoding.decodeSlot(text) {
        let written = EventCoding.encode(slot)
        guard let again = EventCoding.decodeSlot(written) else { fail("a held slot's own text \(written) does not read") }
        check(EventCoding.encode(again) == written, "a held slot written as \(written) reads back as another")
    }
    if let event = EventCoding.decodeEvent(text) {
        let written = EventCoding.event(event).jsonText
        check(EventCoding.decodeEvent(written) == event, "an event written as \(written) reads back as another")
    }
}

/// Whether a refusal of Register is about `parameter` of `parameters`: `InvalidParameter` naming it, or a member or
/// element of it (`posters.uids[1]`); or our error about its content, naming what in it is at fault, with a reason.
private func names(_ error: any Error, _ parameter: String, in parameters: JSONObject) -> Bool {
    switch error {
    case let error as VarlinkError:
        guard error.varlinkName == "org.varlink.service.InvalidParameter",
            let named = error.varlinkParameters["parameter"]?.stringValue
        else { return false }
        return named == parameter || named.hasPrefix(parameter + ".") || named.hasPrefix(parameter + "[")
    case let error as AppError:
        switch (error, parameter) {
        case (.tooManyDeclared(let named, _, _), _): return named == parameter
        case (.invalidKind(let kind, let reason), "kinds"), (.invalidPolicy(let kind, let reason), "kinds"):
            guard case .some = parameters["kinds"]?.objectValue?[kind] else { return false }
            return !reason.isEmpty
        case (.invalidTopic(let topic, let reason), "topics"):
            return parameters["topics"]?.arrayValue?.contains(.string(topic)) == true && !reason.isEmpty
        case (.invalidPosters(let reason), "posters"): return !reason.isEmpty
        default: return false
        }
    default: return false
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-parameters: \(message)")
}
