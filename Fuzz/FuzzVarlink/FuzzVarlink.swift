import NIOCore
import Varlink

/// The Varlink framing and JSON parser as a server meets them: bytes from a peer, split into frames, each read as a
/// call. The first input byte chooses how the rest arrives (chunks of 1 to 16 bytes); the rest is the stream.
///
/// Properties, beyond "no crash": frames and the framing error do not depend on how the bytes were split; what
/// parses writes out and parses back to the same value; a call reads back from its own message as itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVarlink(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    guard let first = input.first else { return 0 }
    let stream = input.dropFirst()
    // Small, so that the fuzzer reaches the bound.
    let limit = 512

    let whole = frames(of: [stream[...]], limit: limit)
    let chunk = Int(first % 16) + 1
    let dripped = frames(
        of: stride(from: stream.startIndex, to: stream.endIndex, by: chunk).map {
            stream[$0..<min($0 + chunk, stream.endIndex)]
        },
        limit: limit
    )
    check(whole.frames == dripped.frames, "frames depend on how the bytes arrived")
    check(whole.failed == dripped.failed, "the framing error depends on how the bytes arrived")

    let strings = JSONStringCache()
    for frame in whole.frames {
        readFrame(frame, strings: strings)
    }
    return 0
}

/// The frames a decoder takes off `chunks` fed one after another, and whether it refused the stream.
private func frames(of chunks: [Slice<UnsafeBufferPointer<UInt8>>], limit: Int) -> (frames: [[UInt8]], failed: Bool) {
    var decoder = VarlinkFrameDecoder(maximumMessageSize: limit)
    var buffer = ByteBuffer()
    var frames: [[UInt8]] = []
    do {
        for chunk in chunks {
            buffer.writeBytes(chunk)
            while let frame = try decoder.nextFrame(from: &buffer) {
                check(frame.readableBytes <= limit, "a frame over the bound")
                frames.append(Array(frame.readableBytesView))
            }
        }
    } catch {
        return (frames, true)
    }
    return (frames, false)
}

private func readFrame(_ frame: [UInt8], strings: JSONStringCache) {
    let value: JSONValue?
    do {
        value = try JSONParser.parse(frame)
    } catch {
        check(error.offset >= 0 && error.offset <= frame.count, "a parse error outside the text: \(error)")
        value = nil
    }
    if let value {
        // Written out, it parses back to itself.
        let text = value.jsonText
        guard let again = try? JSONParser.parse(Array(text.utf8)) else { fail("\(text) does not parse back") }
        check(again == value, "\(text) parses back as another value")
        if let reply = try? VarlinkReply(message: value) {
            var bytes: [UInt8] = []
            reply.writeFrame(to: &bytes)
            check(bytes.last == 0 && bytes.dropLast().allSatisfy { $0 != 0 }, "a reply's frame is not one frame")
            guard let parsed = try? JSONParser.parse(bytes.dropLast()), let back = try? VarlinkReply(message: parsed)
            else { fail("a reply's frame does not read back") }
            check(back == reply, "a reply reads back as another")
        }
    }

    // As a server reads it, with a Post's payload kept as text, and with the method its last call named.
    for keepingPayload in [false, true] {
        let call: VarlinkCall
        do {
            call = try VarlinkCall(
                json: frame,
                strings: strings,
                checkedMethod: keepingPayload ? "io.coalesced.App.Post" : nil,
                keepingAsText: { keepingPayload && $0 == "io.coalesced.App.Post" ? ["payload"] : [] }
            )
        } catch {
            continue
        }
        // What reads as a call is JSON, and its method is named as the specification says (the checked one aside).
        check(value?.isObject == true, "a call read from text that is not a JSON object")
        check(
            call.method == "io.coalesced.App.Post" || VarlinkNames.isValidQualifiedMethod(call.method),
            "a call to '\(call.method)'"
        )
        if case .text(let payload)? = call.parameters["payload"] {
            check(payload.value == (try? JSONParser.parse(payload.utf8)), "a payload kept as text reads as another value")
        }
        let message = call.message.jsonText
        guard let back = try? VarlinkCall(json: Array(message.utf8), checkedMethod: call.method) else {
            fail("a call's own message \(message) does not read back")
        }
        check(back == call, "a call reads back from \(message) as another")
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    fatalError("fuzz-varlink: \(message)")
}
