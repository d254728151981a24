import CoalesceCore
@testable import CoalesceServer
import Varlink

/// AddWatch's parameters as the daemon reads them without a journal: the `watch` definition
/// (`WatchDefinition.watch(from:)`, which compiles a `grep` pattern) and the `start`; and the row the store keeps of
/// a watch (its definition with the start inside), which a damaged store hands back as any JSON object. Any text is
/// read as a start too.
///
/// An accepted watch's pattern is tested on three messages, within the matcher's limits.
///
/// The input is JSON text: AddWatch's parameters (`{"watch": {...}, "start": "tail"}`) or a stored definition.
/// Properties, beyond "no crash":
/// - a refusal is a `WatchProblem` naming the watch as it was given, with a reason;
/// - an accepted watch writes out (`WatchDefinition.object`, the form of the store and ListWatches) to JSON text that
///   reads back as the same watch, and writes out the same again; as the store keeps it, with its start, it reads
///   back as the same watch and the same start;
/// - a start that reads writes out (`WatchDefinition.text(of:)`) to text that reads as the same start.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWatches(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    _ = startForm(String(decoding: input, as: UTF8.self))
    guard let parameters = (try? JSONParser.parse(input))?.objectValue else { return 0 }
    let definition = parameters["watch"]?.objectValue ?? parameters
    // AddWatch's start, or the stored one; tail when none is given, as AddWatch takes it.
    let given = (parameters["start"] ?? definition["start"])?.stringValue
    watchForms(definition, start: given.flatMap(startForm) ?? .tail)
    return 0
}

/// A start as AddWatch and the store read it, which writes out to text that reads the same.
private func startForm(_ text: String) -> WatchStart? {
    guard let start = WatchDefinition.start(parsing: text) else { return nil }
    let written = WatchDefinition.text(of: start)
    let again = WatchDefinition.start(parsing: written)
    check(again == start, "the start \(start) read from \(JSONValue.string(text).jsonText) is written as \(written), which reads as \(again as Any)")
    return start
}

/// A definition read; if it is a watch, its written form and the store's row read back as it.
private func watchForms(_ definition: JSONObject, start: WatchStart) {
    // No pattern is skipped: PCRE2's limits bound what compiling one and testing a message cost, and a pattern
    // that runs past libFuzzer's time or memory limits is a finding.
    let name = definition["name"]?.stringValue ?? ""
    let watch: JournalWatch
    do {
        watch = try WatchDefinition.watch(from: definition)
    } catch {
        check(error.watch == name && !error.reason.isEmpty, "\(JSONValue.object(definition).jsonText) refused with \(error)")
        return
    }
    check(watch.name.value == name, "the watch \(JSONValue.string(name).jsonText) read as \(watch.name)")
    if let pattern = watch.pattern {
        // Tested on nothing, on its own text, and on its text repeated past the bytes a message is tested on.
        do {
            let matcher = try MessageMatcher(pattern)
            let long = String(repeating: pattern.text, count: MessageMatcher.maximumMessageBytes / max(1, pattern.text.utf8.count) + 1)
            for message in ["", pattern.text, long] { _ = matcher.test(message) }
        } catch {
            fail("the pattern of an accepted watch does not compile again: \(error.text)")
        }
    }

    let object = WatchDefinition.object(watch)
    let written = JSONValue.object(object).jsonText
    guard let again = read(written) else { return }
    check(again == watch, "a watch written as \(written) reads back as another: \(again), not \(watch)")
    check(WatchDefinition.object(again) == object, "a watch written as \(written) writes out otherwise the second time")

    // The store's row, as JournalWatches.add writes it and its start reads it.
    var row = object
    row["start"] = .string(WatchDefinition.text(of: start))
    let stored = JSONValue.object(row).jsonText
    guard let kept = read(stored) else { return }
    check(kept == watch, "a watch stored as \(stored) reads back as another: \(kept), not \(watch)")
    let keptStart = (try? JSONParser.parse(stored))?.objectValue?["start"]?.stringValue.flatMap(WatchDefinition.start(parsing:))
    check(keptStart == start, "the start \(start) stored as \(stored) reads back as \(keptStart as Any)")
}

/// The watch of a definition's own text, which must read.
private func read(_ text: String) -> JournalWatch? {
    guard let object = (try? JSONParser.parse(text))?.objectValue else { fail("a watch's own text \(text) is not a JSON object") }
    do {
        return try WatchDefinition.watch(from: object)
    } catch {
        fail("a watch's own text \(text) does not read: \(error)")
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-watches: \(message)")
}
