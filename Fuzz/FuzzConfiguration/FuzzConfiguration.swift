import CoalesceServer

/// The configuration parser, from the text of a file (as the loader reads it: UTF-8, any bytes of it).
///
/// Properties, beyond "no crash": an error names a line of the file it was read from; and reading the same file
/// twice (as if a drop-in repeated the main file) gives what reading it once gives, since a later assignment only
/// overrides an earlier one.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfiguration(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    guard let text = String(validating: input, as: UTF8.self) else { return 0 }
    let main = ConfigurationSource(path: "coalesced.conf", text: text)
    let dropIn = ConfigurationSource(path: "coalesced.conf.d/10-again.conf", text: text)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).count

    let once = Result { () throws(ConfigurationError) in try Configuration.parse([main]) }
    let twice = Result { () throws(ConfigurationError) in try Configuration.parse([main, dropIn]) }
    switch (once, twice) {
    case (.success(let first), .success(let second)):
        check(first == second, "reading the file twice gives another configuration")
    case (.failure(let first), .failure(let second)):
        check(first.path == main.path && first.line >= 1 && first.line <= lines, "an error at no line of the file: \(first)")
        check(first == second, "reading the file twice fails otherwise: \(first) and \(second)")
    case (.success, .failure(let error)):
        check(error.path == dropIn.path && error.line >= 1 && error.line <= lines, "an error at no line of the file: \(error)")
        fail("the file reads once and fails the second time: \(error)")
    case (.failure(let error), .success):
        fail("the file fails once and reads twice: \(error)")
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz-configuration: \(message())") }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-configuration: \(message)")
}
