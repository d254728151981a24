import Varlink

/// `io.coalesced.Protocol`: the errors about the conversation itself, which the Varlink server sends
/// (``VarlinkProtocolError``). It has no methods.
enum ProtocolInterface {
    static func make() -> VarlinkInterface {
        VarlinkInterface(text: InterfaceText.ioCoalescedProtocol, methods: [:])
    }
}
