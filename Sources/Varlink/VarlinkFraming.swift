public import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The default bound on one message, NUL excluded.
public let varlinkDefaultMaximumMessageSize = 1 << 20

/// Splits a byte stream into Varlink messages: each is JSON text ended by a NUL byte.
///
/// Copes with a message split over many reads and with many messages in one read. A message that has not ended
/// within `maximumMessageSize` bytes is refused with ``VarlinkProtocolError/messageTooLarge(limit:)`` before it is
/// buffered further, so a peer cannot make us hold more than that.
public struct VarlinkFrameDecoder {
    public let maximumMessageSize: Int
    /// Bytes already searched for a NUL, so a message dripping in byte by byte is scanned once, not quadratically.
    private var scanned = 0

    public init(maximumMessageSize: Int = varlinkDefaultMaximumMessageSize) {
        self.maximumMessageSize = maximumMessageSize
    }

    /// Takes the next whole message off `buffer`, without its NUL; `nil` until one has arrived.
    public mutating func nextFrame(from buffer: inout ByteBuffer) throws(VarlinkProtocolError) -> ByteBuffer? {
        let scanned = self.scanned
        // memchr, not a generic search over the buffer's view: it was the decoder's whole cost.
        let found = buffer.withUnsafeReadableBytes { bytes -> Int? in
            guard let base = bytes.baseAddress, bytes.count > scanned,
                let nul = memchr(base + scanned, 0, bytes.count - scanned)
            else { return nil }
            return base.distance(to: UnsafeRawPointer(nul))
        }
        guard let length = found else {
            self.scanned = buffer.readableBytes
            if buffer.readableBytes > self.maximumMessageSize {
                throw .messageTooLarge(limit: self.maximumMessageSize)
            }
            return nil
        }
        if length > self.maximumMessageSize {
            throw .messageTooLarge(limit: self.maximumMessageSize)
        }
        self.scanned = 0
        let frame = buffer.readSlice(length: length)!  // length is within the readable bytes
        buffer.moveReaderIndex(forwardBy: 1)
        return frame
    }
}

extension ByteBuffer {
    /// Writes `reply` as one Varlink frame.
    public mutating func writeVarlinkReply(_ reply: VarlinkReply) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        reply.writeFrame(to: &bytes)
        self.writeBytes(bytes)
    }
}
