import CoalesceWire
import Varlink

/// `io.coalesced.Protocol`: the errors about the conversation itself, which the Varlink server sends
/// (``VarlinkProtocolError``) in the interface the daemon names for them. It has no methods.
enum ProtocolInterface {
    /// The name the Varlink server is given for its protocol errors; the interface file declares them under it.
    static let name = ProtocolErrorInterface.name

    static func make() -> VarlinkInterface {
        VarlinkInterface(text: InterfaceText.ioCoalescedProtocol, methods: [:])
    }
}
