import NIOCore
import Testing
import Varlink

@Suite struct FramingTests {
    private func frames(_ chunks: [[UInt8]], limit: Int = 1024) throws -> [String] {
        var decoder = VarlinkFrameDecoder(maximumMessageSize: limit)
        var buffer = ByteBuffer()
        var frames: [String] = []
        for chunk in chunks {
            buffer.writeBytes(chunk)
            while let frame = try decoder.nextFrame(from: &buffer) {
                frames.append(String(buffer: frame))
            }
        }
        return frames
    }

    private let stream = Array("{\"method\":\"a.b.C\"}\u{0}{}\u{0}{\"x\":1}\u{0}".utf8)

    @Test func wholeStreamInOneRead() throws {
        #expect(try self.frames([self.stream]) == [#"{"method":"a.b.C"}"#, "{}", #"{"x":1}"#])
    }

    @Test func dripFedByteByByte() throws {
        #expect(try self.frames(self.stream.map { [$0] }) == [#"{"method":"a.b.C"}"#, "{}", #"{"x":1}"#])
    }

    @Test func splitAtEveryPossiblePoint() throws {
        for cut in 0...self.stream.count {
            let chunks = [Array(self.stream[..<cut]), Array(self.stream[cut...])]
            #expect(try self.frames(chunks) == [#"{"method":"a.b.C"}"#, "{}", #"{"x":1}"#], "cut at \(cut)")
        }
    }

    @Test func incompleteMessageWaits() throws {
        #expect(try self.frames([Array("{\"a\":1".utf8)]) == [])
    }

    @Test func messageAtTheLimitPassesAndOneByteMoreIsRefused() throws {
        let atLimit = [UInt8](repeating: UInt8(ascii: "x"), count: 16) + [0]
        #expect(try self.frames([atLimit], limit: 16).count == 1)
        let over = [UInt8](repeating: UInt8(ascii: "x"), count: 17) + [0]
        #expect(throws: VarlinkProtocolError.messageTooLarge(limit: 16)) { try self.frames([over], limit: 16) }
    }

    @Test func oversizedMessageIsRefusedBeforeItEnds() throws {
        // No NUL ever comes: the decoder must not wait for one while buffering without bound.
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 10)
        #expect(throws: VarlinkProtocolError.messageTooLarge(limit: 16)) { try self.frames([chunk, chunk], limit: 16) }
    }
}
