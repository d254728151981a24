import CoalesceCore
@testable import CoalesceServer
import Varlink

/// AddWatch's parameters as the daemon reads them without a journal: the `watch` definition
/// (`WatchDefinition.watch(from:)`, which compiles a `grep` pattern) and the `start`; and the row the store keeps of
/// a watch (its definition with the start inside), which a damaged store hands back as any JSON object. Any text is
/// read as a start too.
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
    if let grep = definition["grep"]?.stringValue, mayExhaustMemory(grep) { return }
    let name = definition["name"]?.stringValue ?? ""
    let watch: JournalWatch
    do {
        watch = try WatchDefinition.watch(from: definition)
    } catch {
        check(error.watch == name && !error.reason.isEmpty, "\(JSONValue.object(definition).jsonText) refused with \(error)")
        return
    }
    check(watch.name.value == name, "the watch \(JSONValue.string(name).jsonText) read as \(watch.name)")

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

/// Whether glibc's regcomp may take more memory for `pattern` than a fuzzer has. It copies an expression once for
/// each repetition a bound asks (`x{1,99}` is 99 copies of x), and twice for `+` (`x+` is `xx*`), so that nested and
/// stacked repetitions multiply: `((a{1,99}){1,99}){1,99}` takes gigabytes, and so does `a` with 20 `+` after it;
/// the closures it then works out grow with the square of the copies. Until the daemon bounds a pattern's cost
/// itself, the harness passes over a pattern whose tree, so copied, may exceed 4096 nodes.
private func mayExhaustMemory(_ pattern: String) -> Bool {
    expandedSize(Array(pattern.utf8)) > 4096
}

/// An over-estimate of the nodes of glibc's tree for the extended regular expression `bytes` once repetitions are
/// copied out; past 2^32, 2^32.
private func expandedSize(_ bytes: [UInt8]) -> Int {
    let most = 1 << 32
    var index = 0
    var depth = 0
    /// The alternatives from `index` to the `)` closing the group (or the end), which is left unread.
    func alternatives() -> Int {
        var total = 0
        var sequence = 0
        /// The size of the last item, which a repetition after it copies.
        var last = 0
        func add(_ size: Int) {
            last = min(size, most)
            sequence = min(sequence + last, most)
        }
        func repeated(_ times: Int) {
            sequence = min(sequence + last * (times - 1) + 1, most)
            last = min(last * times + 1, most)
        }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "|"):
                total = min(total + sequence, most)
                (sequence, last) = (0, 0)
            case UInt8(ascii: ")") where depth > 0:
                index -= 1
                return min(total + sequence, most)
            case UInt8(ascii: "("):
                depth += 1
                let group = alternatives()
                depth -= 1
                if index < bytes.count { index += 1 }  // the `)`
                add(group + 1)
            case UInt8(ascii: "*"), UInt8(ascii: "?"):
                repeated(1)
            case UInt8(ascii: "+"):
                repeated(2)
            case UInt8(ascii: "{"):
                // {m}, {m,}, {,n}, {m,n}: as many copies as the larger number, one more when unbounded.
                var numbers = [0]
                var end = index
                while end < bytes.count, bytes[end] == UInt8(ascii: ",") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) {
                    if bytes[end] == UInt8(ascii: ",") {
                        numbers.append(0)
                    } else {
                        numbers[numbers.count - 1] = min(numbers[numbers.count - 1] * 10 + Int(bytes[end] - UInt8(ascii: "0")), 1 << 20)
                    }
                    end += 1
                }
                guard end < bytes.count, bytes[end] == UInt8(ascii: "}") else {
                    add(1)  // not a bound: a `{` of its own
                    continue
                }
                index = end + 1
                let unbounded = numbers.count == 2 && end > 0 && bytes[end - 1] == UInt8(ascii: ",")
                repeated(max(numbers.max()! + (unbounded ? 1 : 0), 1))
            case UInt8(ascii: "["):
                // A bracket expression is one node: up to its `]` (one first, or after `^`, is a member; so is the
                // `]` of `[:alpha:]`, `[.x.]` and `[=x=]`).
                if index < bytes.count, bytes[index] == UInt8(ascii: "^") { index += 1 }
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1 }
                while index < bytes.count, bytes[index] != UInt8(ascii: "]") {
                    if bytes[index] == UInt8(ascii: "["), index + 1 < bytes.count, [UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "=")].contains(bytes[index + 1]) {
                        let kind = bytes[index + 1]
                        index += 2
                        while index + 1 < bytes.count, !(bytes[index] == kind && bytes[index + 1] == UInt8(ascii: "]")) { index += 1 }
                        index += 2
                    } else {
                        index += 1
                    }
                }
                index += 1
                add(1)
            case UInt8(ascii: "\\"):
                index += 1
                add(1)
            default:
                add(1)
            }
        }
        return min(total + sequence, most)
    }
    return alternatives()  // at the top, a `)` with no `(` is read as itself
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-watches: \(message)")
}
